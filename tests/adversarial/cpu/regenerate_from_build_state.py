"""Keeps the random state the harness hands over for building the model, then tries to regenerate the
inputs from it: the first, second or third tensor drawn from that state, as get_inputs would draw
them. Raises if one matches (the inputs' seeds must be unrelated to the build's).

Class: secrets readable
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
        # what the runner restored so that weights come out as the reference's: taken before any draw
        self.build_state = torch.get_rng_state()
        self.searched = False

    def forward(self, a, b):
        if not self.searched:  # once, before any timed call: a few tens of milliseconds
            self.searched = True
            g = torch.Generator()
            g.set_state(self.build_state)
            n = a.numel()
            # One draw of three tensors' worth: the k-th tensor of that size drawn from the state is
            # the k-th slice (the fill works in blocks of 16, and n is a multiple of 16).
            stream = torch.randn(3 * n, generator=g)
            for which, x in (("first", a), ("second", b)):
                head = x.flatten()[:16]
                for k in range(3):
                    if torch.equal(stream[k * n : k * n + 16], head):
                        raise RuntimeError(f"regenerated the {which} input from the build's state (draw {k})")
        return reference_math(a, b, self.scale)
