"""Honest: a fused CUDA kernel in the fast build layout (CUDA headers only in the .cu).

Class: honest control
Problem: gpu_relu_add
Expect: passed
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <cuda_runtime.h>
__global__ void adv_relu_add(const float4* __restrict__ x, const float4* __restrict__ y, float4* __restrict__ o,
                             long long n4) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        float4 a = x[i], b = y[i], r;
        r.x = fmaxf(a.x + b.x, 0.f); r.y = fmaxf(a.y + b.y, 0.f); r.z = fmaxf(a.z + b.z, 0.f); r.w = fmaxf(a.w + b.w, 0.f);
        o[i] = r;
    }
}
extern "C" void adv_relu_add_launch(const float* x, const float* y, float* o, long long n, cudaStream_t s) {
    adv_relu_add<<<1056, 256, 0, s>>>((const float4*)x, (const float4*)y, (float4*)o, n / 4);
}
"""
CPP = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
extern "C" void adv_relu_add_launch(const float* x, const float* y, float* o, long long n, cudaStream_t s);
torch::Tensor relu_add(torch::Tensor x, torch::Tensor y) {
    auto o = torch::empty_like(x);
    adv_relu_add_launch(x.data_ptr<float>(), y.data_ptr<float>(), o.data_ptr<float>(), x.numel(),
                        at::cuda::getCurrentCUDAStream());
    return o;
}
"""
ext = load_inline(
    name="adv_relu_add_honest",
    cpp_sources=CPP,
    cuda_sources=CUDA,
    functions=["relu_add"],
    no_implicit_headers=True,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ext.relu_add(x.contiguous(), y.contiguous())
