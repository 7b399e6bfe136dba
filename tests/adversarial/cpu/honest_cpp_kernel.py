"""An honest C++ kernel for relu(a * scale + b), built with load_inline.

Class: honest control
Problem: scaled_add
Expect: passed
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
torch::Tensor scaled_add_relu(torch::Tensor a, torch::Tensor b, double scale) {
  auto out = torch::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t n = a.numel();
  const float s = static_cast<float>(scale);
  for (int64_t i = 0; i < n; ++i) {
    float v = pa[i] * s + pb[i];
    po[i] = v > 0.0f ? v : 0.0f;
  }
  return out;
}
"""

_ext = load_inline(
    name="adv_scaled_add",
    cpp_sources=_SRC,
    functions=["scaled_add_relu"],
    # no extra flags: the suite's other C++ candidates have none, so one precompiled header serves all
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return _ext.scaled_add_relu(a.contiguous(), b.contiguous(), self.scale)
