"""Speed of light on a GPU: measured peaks against the datasheet, and an honest device copy near its
bandwidth roofline through the evaluator (docs/sol.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.evaluator.trusted.sol_calibrate import calibrate
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Status
from stark_mcp.sol.published import published_peaks

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.anyio,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

COPY_PROBLEM = '''
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x.clone()


def get_inputs():
    return [torch.randn(1 << 27)]


def get_init_inputs():
    return []
'''
COPY_CANDIDATE = '''
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        out.copy_(x)
        return out
'''


def test_measured_peaks_are_below_the_datasheet_and_not_far_below() -> None:
    measured = calibrate("cuda", {"copy_bytes": 512 << 20, "mm_fp32": 4096, "mm_bf16": 4096, "repeats": 5})
    published = published_peaks(torch.cuda.get_device_name())
    if published is None:
        pytest.skip(f"no datasheet entry for {torch.cuda.get_device_name()}")
    assert 0.5 < measured["bandwidth_bytes_per_s"] / published.bandwidth_bytes_per_s < 1.05
    assert 0.3 < measured["fp32_flops_per_s"] / published.fp32_flops_per_s < 1.05
    assert 0.3 < measured["tensor_flops_per_s"] / published.tensor_flops_per_s < 1.05


async def test_a_device_copy_reaches_most_of_its_bandwidth_roofline(tmp_path: Path) -> None:
    settings = EvalSettings(baselines=("eager",), profile=False)
    async with Evaluator(tmp_path, settings) as ev:
        problem = problem_from_source(COPY_PROBLEM, "copy")
        evaluation = await ev.evaluate(problem, COPY_CANDIDATE, device="cuda")
    assert evaluation.status is Status.PASSED, evaluation.message
    sol = evaluation.sol
    assert sol is not None and sol.bound == "memory" and sol.peaks.source == "measured"
    assert sol.fraction is not None and sol.fraction >= 0.6, sol.model_dump_json()
    assert not sol.below_floor
