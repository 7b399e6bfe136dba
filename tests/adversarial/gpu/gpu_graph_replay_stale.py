"""Captures one CUDA graph on the first call and replays it for every later call, whatever the buffers.

Class: timed calls do no work
Problem: gpu_matmul
Expect: wrong_output/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None

    def forward(self, a, b):
        if self.graph is None:
            self.out = torch.mm(a, b)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                torch.mm(a, b, out=self.out)
        self.graph.replay()
        return self.out
