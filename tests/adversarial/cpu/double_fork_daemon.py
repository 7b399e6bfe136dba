"""Double-forks a daemon in a new session that outlives the call.

Class: blame and crashes
Problem: scaled_add
Expect: passed<=1.35
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        import os, time

        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open("/proc/self/comm", "w") as fh:
                    fh.write("adv-leftover")
                while True:
                    time.sleep(0.1)
            os._exit(0)

    def forward(self, a, b):
        return reference_math(a, b, self.scale)
