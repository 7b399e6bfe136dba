"""Answers a call with a record claiming the problem is broken, to shift the blame.

Class: the judge is patchable
Problem: scaled_add
Expect: runtime_error/channel
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

    def forward(self, a, b):
        from stark_mcp.evaluator.common import control

        runner = _find_runner()
        original = runner.side.done

        def done(seq, ns, meta, _original=original):
            return _original(
                seq, ns, {"ok": False, "status": "problem", "reason": "get_inputs()", "message": "x"}
            )

        runner.side.done = done
        return reference_math(a, b, self.scale)
