"""Graph replay bound to the first call's input addresses: one graph, captured on the first call's
buffers, replayed for every call whatever buffers it gets. Where the harness rotates input slots the
replay reads another call's inputs; with a single slot it reads the current ones and is merely honest.

Class: timed calls do no work
Problem: gpu_relu_add
Expect: wrong_output/* | passed<=1.3
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None

    def forward(self, x, y):
        if self.graph is None:
            self.out = torch.empty_like(x)
            torch.add(x, y, out=self.out).relu_()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                torch.add(x, y, out=self.out).relu_()
        self.graph.replay()
        return self.out.clone()
