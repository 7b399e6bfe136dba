"""Small hand-written sources shared by the agents tests."""

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)
        return y * self.scale


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return [2.0]
'''

CANDIDATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor scaled_tanh(torch::Tensor x, double s) { return torch::tanh(x) * s; }
"""

_ext = load_inline(name="scaled_tanh", cpp_sources=cpp_source, functions=["scaled_tanh"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scaled_tanh(x, self.scale)
'''
