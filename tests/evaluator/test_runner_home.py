"""Tools that keep a folder under HOME find the jail's own in a runner, not the evaluator's."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator import Evaluator
from stark_mcp.problems import load_problem
from stark_mcp.records import Status
from tests.evaluator.conftest import FAST, FIXTURES
from tests.toolchain import shared_toolchain

pytestmark = pytest.mark.anyio

# Raises with what it found, so the verdict's message carries it out of the sandbox.
REPORTS_HOMES = '''
import os

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, *inputs):
        raise RuntimeError(f"HOME={os.environ.get('HOME')} TRITON_HOME={os.environ.get('TRITON_HOME')}")
'''


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_triton_home_in_a_runner_is_the_jails_home(tmp_path: Path) -> None:
    # torch.compile's baselines write Triton's cache under TRITON_HOME; the zygote the runner was
    # forked from imported Triton under the evaluator's HOME, so a runner must name its own.
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    async with Evaluator(tmp_path / "cache", FAST, toolchain_dir=shared_toolchain()) as ev:
        result = await ev.evaluate(problem, REPORTS_HOMES, device="cpu", settings=FAST)
    assert result.status is Status.RUNTIME_ERROR, result.message
    words = result.message.split()
    found = dict(w.split("=", 1) for w in words if w.startswith(("HOME=", "TRITON_HOME=")))
    assert found.get("HOME") and found.get("TRITON_HOME") == found["HOME"], result.message
    assert found["HOME"] != str(Path.home()), result.message
