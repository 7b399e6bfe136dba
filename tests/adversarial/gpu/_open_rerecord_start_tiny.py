"""OPEN (not in the suite: its file name starts with an underscore): re-records the harness's start
event after its work on a launch-bound problem. Its report is then about zero; the trusted figure is
a few microseconds, within the GPU's absolute slack (40 us) of that report, so the report is the
figure of record; no forgery is called below a 0.25 ms gap; and the output fits in the L2, so the
output-write floor is zero. Measure it on a device (docs/benchmarks/adversarial.md, "Open"):

    stark-mcp eval tests/adversarial/problems/gpu_relu_add_tiny.py \
        tests/adversarial/gpu/_open_rerecord_start_tiny.py --device cuda --baselines eager --no-cache

Class: the judge is patchable
Problem: gpu_relu_add_tiny
Expect: passed<=1.3 | rejected/*
"""

import sys

import torch
import torch.nn as nn


def harness_start():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "call" and "start" in frame.f_locals:
            return frame.f_locals["start"]
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.relu(x + y)
        start = harness_start()
        if start is not None:
            start.record()
        return out
