import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Device code only: no torch headers here, so nvcc compiles a small file quickly.
# The kernel is reached through an extern "C" launcher that takes raw pointers and a stream.
cuda_source = r"""
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void gated_bias_kernel(const float* __restrict__ a,
                                  const float* __restrict__ b,
                                  const float* __restrict__ bias,
                                  float* __restrict__ out,
                                  float scale, int64_t n, int64_t features) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float gate = 1.0f / (1.0f + expf(-b[i]));
        out[i] = a[i] * gate * scale + bias[i % features];
    }
}

extern "C" int gated_bias_launch(const float* a, const float* b, const float* bias, float* out,
                                 float scale, int64_t n, int64_t features, cudaStream_t stream) {
    if (n == 0) return 0;
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 8192) blocks = 8192;  // the grid-stride loop covers the rest
    gated_bias_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(a, b, bias, out, scale, n, features);
    return (int)cudaGetLastError();
}
"""

# Host code: checks, allocation and the Python binding. It runs on torch's current stream.
cpp_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

extern "C" int gated_bias_launch(const float* a, const float* b, const float* bias, float* out,
                                 float scale, int64_t n, int64_t features, cudaStream_t stream);

torch::Tensor gated_bias(torch::Tensor a, torch::Tensor b, torch::Tensor bias, double scale) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && bias.is_cuda(), "gated_bias: CUDA tensors expected");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "gated_bias: float32 tensors expected");
    TORCH_CHECK(a.sizes() == b.sizes(), "gated_bias: a and b must have the same shape");
    TORCH_CHECK(a.dim() >= 1 && a.size(-1) == bias.numel(), "gated_bias: bias must match the last dim");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto bias_c = bias.contiguous();
    auto out = torch::empty_like(a_c);
    const int err = gated_bias_launch(a_c.data_ptr<float>(), b_c.data_ptr<float>(), bias_c.data_ptr<float>(),
                                      out.data_ptr<float>(), (float)scale, a_c.numel(), bias_c.numel(),
                                      at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == 0, "gated_bias: kernel launch failed: ", cudaGetErrorString((cudaError_t)err));
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("gated_bias", &gated_bias, "a * sigmoid(b) * scale + bias (CUDA)");
}
"""

_ext = load_inline(
    name="gated_bias_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    no_implicit_headers=True,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        # Same attributes, created in the same order as the reference, so the weights match.
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.gated_bias(a, b, self.bias, self.scale)
