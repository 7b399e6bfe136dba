"""Batched capture: enqueues its work (a CUDA graph, captured and replayed) on the first call only;
every later call launches nothing and returns the same static output.

Class: timed calls do no work
Problem: gpu_relu_add
Expect: wrong_output/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x, y):
        if self.out is None:
            self.out = torch.empty_like(x)
            torch.add(x, y, out=self.out).relu_()  # warm up outside the capture
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                torch.add(x, y, out=self.out).relu_()
            self.graph.replay()
        return self.out
