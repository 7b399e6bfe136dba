"""A forked helper holds 1.5 GiB of shared anonymous memory (touched once, then left alone) while the
runner itself computes honestly: the memory is the jail's wherever in it it lies.

Class: blame and crashes
Problem: scaled_add
Expect: runtime_error/resource
"""

import mmap
import os
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.helper = None

    def forward(self, a, b):
        if self.helper is None:
            self.helper = os.fork()
            if self.helper == 0:
                try:
                    held = mmap.mmap(-1, 3 << 29, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
                    for offset in range(0, len(held), 4096):
                        held[offset] = 1
                    time.sleep(600)
                finally:
                    os._exit(0)
            time.sleep(3)  # long enough for the helper to fill it
        return torch.relu(a * self.scale + b)
