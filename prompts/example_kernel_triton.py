import torch
import torch.nn as nn
import triton
import triton.language as tl


# One program handles BLOCK_COLS columns of one row, so the bias is loaded once per program and
# every load and store is contiguous. autotune picks the block size per row length (the key);
# the evaluator's warm-up calls run it before any call is timed.
@triton.autotune(
    configs=[
        triton.Config({"BLOCK_COLS": 512}, num_warps=4),
        triton.Config({"BLOCK_COLS": 1024}, num_warps=4),
        triton.Config({"BLOCK_COLS": 2048}, num_warps=8),
    ],
    key=["features"],
)
@triton.jit
def gated_bias_kernel(a_ptr, b_ptr, bias_ptr, out_ptr, scale, features, BLOCK_COLS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: rows * features may pass 2**31
    cols = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    mask = cols < features
    offsets = row * features + cols
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0)
    gate = 1.0 / (1.0 + tl.exp(-b))  # float32 throughout, like the reference
    tl.store(out_ptr + offsets, a * gate * scale + bias, mask=mask)


def gated_bias(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    if a.shape != b.shape or a.shape[-1] != bias.numel():
        raise ValueError("gated_bias: a and b must have the same shape, and bias the last dimension's size")
    a, b, bias = a.contiguous(), b.contiguous(), bias.contiguous()
    out = torch.empty_like(a)
    features = a.shape[-1]
    rows = a.numel() // features if features else 0
    if rows == 0:
        return out

    def grid(meta: dict) -> tuple[int, int]:
        return (rows, triton.cdiv(features, meta["BLOCK_COLS"]))

    gated_bias_kernel[grid](a, b, bias, out, scale, features)
    return out


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        # Same attributes, created in the same order as the reference, so the weights match.
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return gated_bias(a, b, self.bias, self.scale)
