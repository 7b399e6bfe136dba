"""Below the physical floor: writes its result straight into the harness's output region (found by
walking up to the harness's frame) and returns that view, so the publish copy that the baseline's
bracket pays is skipped, then re-records the harness's start event after its work. Its report is
then near zero and the trusted figure (its bracket less the baseline's larger harness share) lies
within the slack of it: the figure of record would be far below what writing the output costs.

Class: the judge is patchable
Problem: gpu_relu_add
Expect: rejected/output_in_harness_region | rejected/below_physical_floor
"""

import sys

import torch
import torch.nn as nn


def harness_locals():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "call" and "expected" in frame.f_locals and "start" in frame.f_locals:
            return frame.f_locals
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def forward(self, x, y):
        found = harness_locals()
        if found is None or not isinstance(found["expected"][0], torch.Tensor):
            return torch.relu(x + y)
        out = found["expected"][0]
        torch.add(x, y, out=out).relu_()
        found["start"].record()  # the interval the harness reports now holds none of the work
        return out
