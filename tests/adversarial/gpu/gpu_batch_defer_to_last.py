"""Defers the work of a timing batch to its last call: every call of a batch but the last returns
a view of a buffer it has not written yet, and the last computes all of them with a few kernels
for the whole batch (a throughput no single call has: on a launch-bound problem, tens of times the
reference's). It finds its place in the batch from the harness's frame; single calls (correctness,
warm-up, top-up checks) compute at once. The harness copies each call's output right after that
call's forward, so the deferred outputs are published unwritten (or holding the last batch's).

Class: work deferred across a batch
Problem: gpu_relu_add_tiny
Expect: wrong_output/* | passed<=1.3
"""

import sys

import torch
import torch.nn as nn


def batch_place():
    frame = sys._getframe(1)
    while frame is not None:
        local = frame.f_locals
        if "outs" in local and "count" in local and isinstance(local["outs"], list):
            return len(local["outs"]), local["count"]
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.xs, self.ys = [], []
        self.buffer = None

    def forward(self, x, y):
        place = batch_place()
        if place is None:
            return torch.relu(x + y)
        index, count = place
        if self.buffer is None or self.buffer.shape[0] != count:
            self.buffer = torch.empty((count, *x.shape), dtype=x.dtype, device=x.device)
        if index == 0:
            self.xs, self.ys = [], []
        self.xs.append(x)
        self.ys.append(y)
        if index == count - 1:
            torch.relu(torch.stack(self.xs) + torch.stack(self.ys), out=self.buffer)
        return self.buffer[index]
