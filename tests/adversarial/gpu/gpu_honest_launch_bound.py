"""Honest: the reference's own two ops on a launch-bound problem (a few microseconds a call): it
passes at about the reference's speed.

Class: honest control
Problem: gpu_relu_add_tiny
Expect: passed
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)
