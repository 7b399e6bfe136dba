"""Does no work in its forward and rewrites the harness's description of its output so that the worker
reads the bytes from elsewhere: the first call's (real) result, kept aside, then an unmapped page.

Class: the judge is patchable
Problem: scaled_add
Expect: wrong_output/* | runtime_error/* | rejected/*
"""

import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.kept = None
        self.calls = 0
        outputs = sys.modules.get("stark_mcp.evaluator.untrusted.outputs")
        walker = getattr(outputs, "_Walker", None)
        if walker is not None:
            honest = walker.tensor
            model = self

            def tensor(self_, node):
                entry = honest(self_, node)
                if "addr" in entry and model.kept is not None:
                    # the stale result for most calls, a page nobody mapped for every seventh
                    entry["addr"] = 4096 if model.calls % 7 == 0 else model.kept.data_ptr()
                return entry

            walker.tensor = tensor

    def forward(self, a, b):
        self.calls += 1
        if self.kept is None:
            self.kept = torch.relu(a * self.scale + b)
            return self.kept.clone()
        return torch.empty_like(a)
