"""Computes only the first rows of its output, in a mapping of its own, clears its pages' referenced
bits (/proc/self/clear_refs) and has a thread poll /proc/self/smaps: a worker reading the output
through /proc/<pid>/mem marks its pages referenced, and the thread then fills in the rest, racing
the read. The runner is frozen while a checked call's output is read: the read is over before any
thread of it runs again.

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/*
"""

import mmap
import threading
import time

import torch
import torch.nn as nn

EAGER_ROWS = 64


def _referenced_kb(start: int) -> int:
    inside = False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            if "-" in line.split()[0] and not line.split()[0].endswith(":"):
                inside = int(line.split()[0].split("-")[0], 16) == start
            elif inside and line.startswith("Referenced:"):
                return int(line.split()[1])
    return 0


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.buffer = mmap.mmap(-1, 1024 * 1024 * 4)
        self.out = torch.frombuffer(self.buffer, dtype=torch.float32).view(1024, 1024)
        self.start = self.out.data_ptr()
        self.pending = None
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        while True:
            time.sleep(0.0002)
            pending = self.pending
            if pending is not None and _referenced_kb(self.start) > 0:
                a, b = pending
                self.out[EAGER_ROWS:] = torch.relu(a[EAGER_ROWS:] * self.scale + b[EAGER_ROWS:])
                self.pending = None

    def forward(self, a, b):
        self.pending = None
        self.out[:EAGER_ROWS] = torch.relu(a[:EAGER_ROWS] * self.scale + b[:EAGER_ROWS])
        self.out[EAGER_ROWS:].zero_()
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("1")
        except OSError:
            pass
        self.pending = (a, b)
        return self.out
