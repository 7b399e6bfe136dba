import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ float bias_mish_tanh_val(float x, float b) {
    const float v = x + b;
    float m;
    if (v > 20.0f) {
        m = v;
    } else {
        const float e = expf(v);
        const float n = e * (e + 2.0f);
        m = v * (n / (n + 2.0f));
    }
    return tanhf(m);
}

__global__ void bias_mish_tanh_kernel(float* __restrict__ y,
                                      const float* __restrict__ bias,
                                      int C, int64_t S, int64_t row0, int64_t rows,
                                      int use_vec) {
    const int64_t row = row0 + (int64_t)blockIdx.y;
    if (row >= rows) return;
    const float b = bias[row % C];
    float* __restrict__ p = y + row * S;
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    const int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (use_vec) {
        float4* __restrict__ p4 = reinterpret_cast<float4*>(p);
        const int64_t n4 = S >> 2;
        for (int64_t i = start; i < n4; i += stride) {
            float4 v = p4[i];
            v.x = bias_mish_tanh_val(v.x, b);
            v.y = bias_mish_tanh_val(v.y, b);
            v.z = bias_mish_tanh_val(v.z, b);
            v.w = bias_mish_tanh_val(v.w, b);
            p4[i] = v;
        }
    } else {
        for (int64_t i = start; i < S; i += stride) {
            p[i] = bias_mish_tanh_val(p[i], b);
        }
    }
}

extern "C" int bias_mish_tanh_launch(float* y, const float* bias, int64_t rows, int C, int64_t S,
                                     cudaStream_t stream) {
    if (rows <= 0 || S <= 0) return 0;
    const int threads = 256;
    const int use_vec = ((S % 4) == 0) && ((reinterpret_cast<uintptr_t>(y) & 15) == 0) ? 1 : 0;
    const int64_t work = use_vec ? (S / 4) : S;
    int64_t bx = (work + threads - 1) / threads;
    if (bx > 64) bx = 64;
    if (bx < 1) bx = 1;
    const int64_t max_y = 65535;
    for (int64_t r0 = 0; r0 < rows; r0 += max_y) {
        int64_t chunk = rows - r0;
        if (chunk > max_y) chunk = max_y;
        dim3 grid((unsigned int)bx, (unsigned int)chunk, 1);
        bias_mish_tanh_kernel<<<grid, threads, 0, stream>>>(y, bias, C, S, r0, rows, use_vec);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return (int)err;
    }
    return (int)cudaGetLastError();
}
"""

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

extern "C" int bias_mish_tanh_launch(float* y, const float* bias, int64_t rows, int C, int64_t S,
                                     cudaStream_t stream);

void bias_mish_tanh_(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && bias.is_cuda(), "bias_mish_tanh_: CUDA tensors expected");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "bias_mish_tanh_: float32 tensors expected");
    TORCH_CHECK(y.dim() == 5, "bias_mish_tanh_: y must be 5-D");
    TORCH_CHECK(y.is_contiguous(), "bias_mish_tanh_: y must be contiguous");
    TORCH_CHECK(bias.numel() == y.size(1), "bias_mish_tanh_: bias must have C elements");
    const at::cuda::OptionalCUDAGuard guard(device_of(y));
    auto bias_c = bias.contiguous();
    const int64_t N = y.size(0);
    const int64_t C = y.size(1);
    const int64_t S = y.size(2) * y.size(3) * y.size(4);
    const int64_t rows = N * C;
    if (rows == 0 || S == 0) return;
    const int err = bias_mish_tanh_launch(y.data_ptr<float>(), bias_c.data_ptr<float>(), rows, (int)C, S,
                                          at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == 0, "bias_mish_tanh_: kernel launch failed: ", cudaGetErrorString((cudaError_t)err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("bias_mish_tanh_", &bias_mish_tanh_, "in-place y = tanh(mish(y + bias[c])) (CUDA)");
}
"""

_ext = load_inline(
    name="conv3d_bias_mish_tanh_ext",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    no_implicit_headers=True,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    """
    Model that performs a 3D convolution, applies Mish activation, and then applies Tanh activation.
    """
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): Input tensor of shape (batch_size, in_channels, D, H, W).

        Returns:
            torch.Tensor: Output tensor of shape (batch_size, out_channels, D', H', W').
        """
        y = torch.nn.functional.conv3d(x, self.conv.weight, None, self.conv.stride,
                                       self.conv.padding, self.conv.dilation, self.conv.groups)
        y = y.contiguous()
        bias = self.conv.bias
        if bias is None:
            bias = torch.zeros(y.size(1), device=y.device, dtype=y.dtype)
        _ext.bias_mish_tanh_(y, bias)
        return y
