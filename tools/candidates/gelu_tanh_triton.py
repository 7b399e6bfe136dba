"""The tanh-approximated GELU over a float32 tensor as one Triton kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)  # tanh(u); exp's overflow to inf gives exactly 1
    tl.store(y_ptr + offsets, 0.5 * v * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        gelu_tanh_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096, num_warps=8)
        return y
