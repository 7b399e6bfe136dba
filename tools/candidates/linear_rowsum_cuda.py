"""A linear layer followed by a sum over its features (the size-1 max, mean and logsumexps after it
are identities): sum_j (x . W_j + b_j) = x . (sum_j W_j) + sum_j b_j, so the weight's column sums
are reduced first and the matrix product becomes a matrix-vector product. Torch headers in the .cu
source and ``functions=`` bindings, as models usually write it."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

// w is [rows, cols]; colsum[c] += the sum of w[r, c] over this block's slice of rows. One thread per
// column (coalesced), blockIdx.y picks the slice: enough blocks to keep every SM reading.
__global__ void column_sums(const float* __restrict__ w, float* __restrict__ colsum, int rows, int cols,
                            int rows_per_block) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int first = blockIdx.y * rows_per_block;
    int last = min(rows, first + rows_per_block);
    float acc = 0.0f;
    for (int r = first; r < last; ++r) acc += w[(long long)r * cols + c];
    atomicAdd(colsum + c, acc);
}

// out[i] = x[i, :] . colsum + sum(bias). One block per row, a shared-memory tree reduction.
__global__ void row_dot(const float* __restrict__ x, const float* __restrict__ colsum,
                        const float* __restrict__ bias, float* __restrict__ out, int cols, int nbias) {
    __shared__ float part[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float acc = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c] * colsum[c];
    for (int c = threadIdx.x; c < nbias; c += blockDim.x) acc += bias[c];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

torch::Tensor linear_rowsum(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "linear_rowsum: float32 CUDA input");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    int batch = (int)xc.size(0), in_features = (int)xc.size(1), out_features = (int)wc.size(0);
    TORCH_CHECK(wc.size(1) == in_features, "linear_rowsum: weight does not match the input");
    auto colsum = torch::zeros({in_features}, xc.options());
    auto out = torch::empty({batch, 1}, xc.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    const int slices = 64, rows_per_block = (out_features + slices - 1) / slices;
    dim3 grid((in_features + 255) / 256, slices);
    column_sums<<<grid, 256, 0, stream>>>(
        wc.data_ptr<float>(), colsum.data_ptr<float>(), out_features, in_features, rows_per_block);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    row_dot<<<batch, 256, 0, stream>>>(
        xc.data_ptr<float>(), colsum.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(),
        in_features, out_features);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="bench_mcp_linear_rowsum",
    cpp_sources="torch::Tensor linear_rowsum(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=CUDA_SRC,
    functions=["linear_rowsum"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # created as the reference does: same weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_rowsum(x, self.linear.weight, self.linear.bias)
