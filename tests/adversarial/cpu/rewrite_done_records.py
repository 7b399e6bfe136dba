"""Rewrites what the channel sends: every DONE claims one microsecond.

Class: the judge is patchable
Problem: scaled_add
Expect: rejected/timing_forged
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


def _find_runner():
    import gc

    gc.unfreeze()  # the harness froze its objects out of sight: an attacker thaws them first
    for obj in gc.get_objects():
        if type(obj).__name__ == "Runner" and hasattr(obj, "side") and hasattr(obj, "call"):
            return obj
    return None


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        from stark_mcp.evaluator.common import control

        original = control.RunnerSide.done

        def done(self, seq, reported_ns, meta, _original=original):
            return _original(self, seq, 1000, meta)

        control.RunnerSide.done = done

    def forward(self, a, b):
        return reference_math(a, b, self.scale)
