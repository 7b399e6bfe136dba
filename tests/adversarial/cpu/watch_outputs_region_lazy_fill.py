"""Computes only the first rows of its output and publishes it; a thread watches the shared outputs
region it maps, and the moment a read of a checked call shows there, fills in the rest from the
inputs it kept, racing the worker's read. Checked outputs are read with the runner frozen, into
memory it does not map: nothing shows, every checked call sees the unfilled rows.

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/*
"""

import ctypes
import threading
import time

import torch
import torch.nn as nn

OUT_BYTES = 1024 * 1024 * 4
EAGER_ROWS = 64


def _output_regions():
    found = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            if "stark-region" in line:
                start, end = (int(x, 16) for x in line.split()[0].split("-"))
                if end - start == OUT_BYTES:
                    found.append(start)
    return found


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.out = torch.zeros(1024, 1024)
        self.pending = None
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        last = None
        while True:
            time.sleep(0.00005)
            now = [ctypes.string_at(a, 64) for a in _output_regions()]
            pending = self.pending
            if last is not None and now != last and pending is not None:
                a, b = pending
                self.out[EAGER_ROWS:] = torch.relu(a[EAGER_ROWS:] * self.scale + b[EAGER_ROWS:])
                self.pending = None
            last = now

    def forward(self, a, b):
        self.pending = None
        self.out[:EAGER_ROWS] = torch.relu(a[:EAGER_ROWS] * self.scale + b[:EAGER_ROWS])
        self.out[EAGER_ROWS:].zero_()
        self.pending = (a, b)
        return self.out
