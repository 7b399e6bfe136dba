"""The exported script's self-check: run as a script it exits 0 only when the kernel matches the
reference, and a kernel made wrong (50% off, another shape, NaN) prints FAILED and exits 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stark_mcp.orchestrator.self_check import self_check

REFERENCE = '''import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
'''
KERNEL = '''import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return {body}
'''
CONDITIONS = {"device": "cpu", "cpu_threads": 1, "calls": 3, "warmup_s": 0.0, "tolerance": 2e-5}


def run_export(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "best_kernel.py"
    path.write_text(KERNEL.format(body=body) + self_check(REFERENCE, "recorded: passed", CONDITIONS))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("body", "passes"),
    [
        ("torch.clamp_min(x, 0) * 2", True),
        ("torch.relu(x) * 3", False),  # 50% relative error
        ("(torch.relu(x) * 2)[:, :16]", False),  # another shape
        ("torch.relu(x) * 2 + float('nan')", False),
    ],
)
def test_an_exported_kernel_checks_itself_and_exits_1_when_wrong(
    tmp_path: Path, body: str, passes: bool
) -> None:
    done = run_export(tmp_path, body)
    assert done.returncode == (0 if passes else 1), done.stdout + done.stderr
    assert ("FAILED" in done.stdout) is not passes, done.stdout
    assert "relative error vs reference" in done.stdout
