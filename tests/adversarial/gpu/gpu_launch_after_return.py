"""Returns a buffer at once; a host thread launches the real product into it shortly afterwards.

Class: timing: work hidden from the timer
Problem: gpu_matmul
Expect: wrong_output/* | passed<=1.05
"""

import torch
import torch.nn as nn

import threading


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty(a.shape[0], b.shape[1], device=a.device)
        stream = torch.cuda.Stream()

        def later():
            with torch.cuda.stream(stream):
                torch.mm(a, b, out=out)

        threading.Thread(target=later, daemon=True).start()
        return out
