"""Puts a directory where the evaluator writes its build index, and a FIFO and a link (to a host
directory) among the folders it writes libraries into.

Class: blame and crashes
Problem: scaled_add
Expect: rejected/tamper | passed<=1.35 | build_error/*
"""
# load_inline is mentioned: a builder imports this module first.

import os

import torch
import torch.nn as nn

build = os.environ.get("TORCH_EXTENSIONS_DIR", "")
if build and os.path.isdir(build):
    for make in (
        lambda: os.mkdir(os.path.join(build, "extensions.json")),
        lambda: os.mkfifo(os.path.join(build, "ext")),
        lambda: os.symlink("/tmp", os.path.join(build, "ext2")),
    ):
        try:
            make()
        except OSError:
            pass


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.relu(a * self.scale + b)
