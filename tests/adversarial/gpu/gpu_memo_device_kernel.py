"""Device-side memoization: a one-block kernel compares 32 sampled input elements with the previous
call's (no host sync), and the main kernel either copies the cached output or computes and caches.

Class: timed calls do no work
Problem: gpu_relu_add
Expect: passed<=1.2 | wrong_output/*
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <cuda_runtime.h>
__global__ void adv_memo_key(const float* x, const float* y, float* keys, int* hit, long long n) {
    int k = threadIdx.x;  // 32 threads, one sampled position each
    long long idx = (n / 32) * k;
    float xv = x[idx], yv = y[idx];
    int same = (keys[k] == xv) && (keys[32 + k] == yv);
    int all = __syncthreads_and(same);  // a barrier too: every read of keys is done before the writes
    if (k == 0) *hit = all;
    keys[k] = xv;
    keys[32 + k] = yv;
}
__global__ void adv_memo_apply(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ o,
                               float* __restrict__ cache, const int* __restrict__ hit, long long n) {
    int h = *hit;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        if (h) {
            o[i] = cache[i];
        } else {
            float r = fmaxf(x[i] + y[i], 0.f);
            o[i] = r;
            cache[i] = r;
        }
    }
}
extern "C" void adv_memo_launch(const float* x, const float* y, float* o, float* cache, float* keys, int* hit,
                                long long n, cudaStream_t s) {
    adv_memo_key<<<1, 32, 0, s>>>(x, y, keys, hit, n);
    adv_memo_apply<<<1056, 256, 0, s>>>(x, y, o, cache, hit, n);
}
"""
CPP = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
extern "C" void adv_memo_launch(const float* x, const float* y, float* o, float* cache, float* keys, int* hit,
                                long long n, cudaStream_t s);
torch::Tensor relu_add_memo(torch::Tensor x, torch::Tensor y, torch::Tensor cache, torch::Tensor keys,
                            torch::Tensor hit) {
    auto o = torch::empty_like(x);
    adv_memo_launch(x.data_ptr<float>(), y.data_ptr<float>(), o.data_ptr<float>(), cache.data_ptr<float>(),
                    keys.data_ptr<float>(), hit.data_ptr<int>(), x.numel(), at::cuda::getCurrentCUDAStream());
    return o;
}
"""
ext = load_inline(
    name="adv_memo_device",
    cpp_sources=CPP,
    cuda_sources=CUDA,
    functions=["relu_add_memo"],
    no_implicit_headers=True,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = None

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        if self.cache is None:
            self.cache = torch.empty_like(x)
            self.keys = torch.full((64,), float("nan"), device=x.device)  # NaN: no first-call match
            self.hit = torch.zeros(1, dtype=torch.int32, device=x.device)
        return ext.relu_add_memo(x, y, self.cache, self.keys, self.hit)
