"""Starts helper processes at import and ships the work to them after each GO.

Class: resources beyond the budget
Problem: scaled_add
Expect: passed<=1.35 | runtime_error/*
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self.parent_end, child_end = ctx.Pipe()

        def serve(conn):
            with open("/proc/self/comm", "w") as fh:
                fh.write("adv-leftover")
            torch.set_num_threads(1)
            while True:
                x, y, s = conn.recv()
                conn.send(torch.relu(x * s + y))

        ctx.Process(target=serve, args=(child_end,), daemon=True).start()

    def forward(self, a, b):
        self.parent_end.send((a.clone(), b.clone(), self.scale))
        return self.parent_end.recv()
