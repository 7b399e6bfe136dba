"""Holds 1.5 GiB in memfds of 128 MiB each (under the file size limit), written and never mapped: in
no process's resident set, so only a cap that counts shared memory sees it (the suite's jails have
1 GiB). Held at large, the kernel's OOM killer would pick the largest resident set: the trusted side's.

Class: blame and crashes
Problem: scaled_add
Expect: runtime_error/resource
"""

import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.held = []

    def forward(self, a, b):
        if not self.held:
            chunk = b"\1" * (1 << 20)
            for i in range(12):
                fd = os.memfd_create(f"held{i}")
                for _ in range(128):
                    os.write(fd, chunk)
                self.held.append(fd)
        return torch.relu(a * self.scale + b)
