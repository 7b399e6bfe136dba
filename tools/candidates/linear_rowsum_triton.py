"""A linear layer followed by a sum over its features (the size-1 max, mean and logsumexps after it
are identities), in Triton: the weight's column sums first, then one matrix-vector product."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def column_sums_kernel(
    w_ptr, out_ptr, rows, cols, ROWS_PER_PROGRAM, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr
):
    """Adds this program's slice of rows to the column sums: a grid over columns and row slices keeps
    every SM reading."""
    cols_here = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_mask = cols_here < cols
    first = tl.program_id(1) * ROWS_PER_PROGRAM
    acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    for start in range(0, ROWS_PER_PROGRAM, BLOCK_R):
        r = first + start + tl.arange(0, BLOCK_R)
        offsets = r[:, None].to(tl.int64) * cols + cols_here[None, :]
        tile = tl.load(w_ptr + offsets, mask=(r[:, None] < rows) & col_mask[None, :], other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.atomic_add(out_ptr + cols_here, acc, mask=col_mask)


@triton.jit
def row_dot_kernel(x_ptr, v_ptr, bias_total_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < cols
        acc += tl.load(x_ptr + row * cols + c, mask=mask, other=0.0) * tl.load(
            v_ptr + c, mask=mask, other=0.0
        )
    tl.store(out_ptr + row, tl.sum(acc, axis=0) + tl.load(bias_total_ptr))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # created as the reference does: same weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        rows, cols = w.shape
        colsum = torch.zeros(cols, device=x.device, dtype=torch.float32)
        slices = 64
        per_program = triton.cdiv(triton.cdiv(rows, slices), 32) * 32
        grid = (triton.cdiv(cols, 128), triton.cdiv(rows, per_program))
        column_sums_kernel[grid](w, colsum, rows, cols, per_program, BLOCK_R=32, BLOCK_C=128)
        out = torch.empty(x.shape[0], 1, device=x.device, dtype=torch.float32)
        bias_total = self.linear.bias.sum().reshape(1)
        row_dot_kernel[(x.shape[0],)](x, colsum, bias_total, out, cols, BLOCK=1024)
        return out
