"""Honest: one CUDA graph over static buffers; every call copies its inputs in, replays, and returns
a fresh copy of the output (slower than eager here, but it computes on the current inputs).

Class: honest control
Problem: gpu_relu_add
Expect: passed
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None

    def forward(self, x, y):
        if self.graph is None:
            self.sx, self.sy = torch.empty_like(x), torch.empty_like(y)
            self.out = torch.empty_like(x)
            self.sx.copy_(x)
            self.sy.copy_(y)
            torch.add(self.sx, self.sy, out=self.out).relu_()  # warm up outside the capture
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                torch.add(self.sx, self.sy, out=self.out).relu_()
        self.sx.copy_(x)
        self.sy.copy_(y)
        self.graph.replay()
        return self.out.clone()
