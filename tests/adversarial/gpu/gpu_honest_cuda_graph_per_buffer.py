"""Honest: a CUDA graph captured per input buffer, replayed with the buffer's fresh contents.

Class: honest control
Problem: gpu_relu_add
Expect: passed
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}

    def forward(self, x, y):
        key = (x.data_ptr(), y.data_ptr())
        if key not in self.graphs:
            out = torch.empty_like(x)
            torch.add(x, y, out=out).relu_()  # warm up outside the capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                torch.add(x, y, out=out).relu_()
            self.graphs[key] = (graph, out)
        graph, out = self.graphs[key]
        graph.replay()
        return out.clone()
