import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One pass over memory instead of the four temporaries the eager version makes.
# at::parallel_for splits the rows over torch's intra-op thread pool (one thread when timed).
cpp_source = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>

torch::Tensor gated_bias(torch::Tensor a, torch::Tensor b, torch::Tensor bias, double scale) {
    TORCH_CHECK(a.device().is_cpu() && b.device().is_cpu() && bias.device().is_cpu(),
                "gated_bias: CPU tensors expected");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "gated_bias: float32 tensors expected");
    TORCH_CHECK(a.sizes() == b.sizes(), "gated_bias: a and b must have the same shape");
    TORCH_CHECK(a.dim() >= 1 && a.size(-1) == bias.numel(), "gated_bias: bias must match the last dim");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto bias_c = bias.contiguous();
    auto out = torch::empty_like(a_c);
    const int64_t features = bias_c.numel();
    const int64_t rows = features == 0 ? 0 : a_c.numel() / features;
    const float* pa = a_c.data_ptr<float>();
    const float* pb = b_c.data_ptr<float>();
    const float* pbias = bias_c.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const float s = (float)scale;
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const int64_t base = r * features;
            for (int64_t j = 0; j < features; ++j) {
                const float gate = 1.0f / (1.0f + std::exp(-pb[base + j]));
                po[base + j] = pa[base + j] * gate * s + pbias[j];
            }
        }
    });
    return out;
}
"""

_ext = load_inline(
    name="gated_bias_cpu",
    cpp_sources=cpp_source,
    functions=["gated_bias"],
    extra_cflags=["-O3", "-fno-trapping-math"],  # the flags device_cpu.md asks for
)


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        # Same attributes, created in the same order as the reference, so the weights match.
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.gated_bias(a, b, self.bias, self.scale)
