"""Rebinds the harness module's ``time`` global to a stand-in whose CPU clock runs at a third speed
(another path to the clock than patching the ``time`` module itself).

Class: the judge is patchable
Problem: tanh_matmul
Expect: rejected/timing_forged | rejected/tamper
"""

import sys
import time as _real_time
import types

import torch
import torch.nn as nn


class _SlowClock(types.SimpleNamespace):
    def __getattr__(self, name):
        return getattr(_real_time, name)


def _rebind() -> None:
    for name, module in list(sys.modules.items()):
        if (name.endswith("untrusted.runner") or name == "__main__") and hasattr(module, "time"):
            fake = _SlowClock(process_time_ns=lambda: _real_time.process_time_ns() // 3,
                              perf_counter_ns=lambda: _real_time.perf_counter_ns() // 3)
            module.time = fake


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)
        _rebind()

    def forward(self, x):
        return torch.tanh(x @ self.weight)
