"""Punches holes through every shared memory region it can reach (inputs, outputs, the control
block) between its calls, then computes honestly: what the worker reads back there turns to zeros.

Class: blame and crashes
Problem: scaled_add
Expect: rejected/input_mutated | runtime_error/* | wrong_output/* | timeout/* | passed<=1.35
"""

import ctypes
import os

import torch
import torch.nn as nn

FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
_libc = ctypes.CDLL(None, use_errno=True)


def _punch_everything() -> None:
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("/memfd:"):
            size = os.fstat(int(name)).st_size
            _libc.fallocate(
                int(name), FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, ctypes.c_long(0), ctypes.c_long(size)
            )


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        out = torch.relu(a * self.scale + b)
        if self.calls % 3 == 0:
            _punch_everything()
        return out
