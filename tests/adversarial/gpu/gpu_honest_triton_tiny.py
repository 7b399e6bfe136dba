"""Honest: a Triton kernel for relu(x + y) on the launch-bound problem (one launch instead of the
reference's two: a few microseconds a call).

Class: honest control
Problem: gpu_relu_add_tiny
Expect: passed
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.store(o_ptr + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        relu_add_kernel[(triton.cdiv(n, 4096),)](x, y, out, n, BLOCK=4096)
        return out
