"""Speed of light in real evaluations (CPU): the SOL record, the peaks' cache, the floor check."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator import Evaluator
from stark_mcp.evaluator.host.sol_floor import peaks_version
from stark_mcp.evaluator.host.verdict_dependencies import stack_tag
from stark_mcp.problems import load_problem, problem_from_source
from stark_mcp.records import Status
from stark_mcp.sol.model import Peaks
from tests.evaluator.conftest import FAST, FIXTURES, fixture_text
from tests.toolchain import shared_toolchain

pytestmark = pytest.mark.anyio

# sum(x @ w) over every element, and the same number by an algebraic collapse: column sums of x
# against row sums of w, a vector product instead of a 512^3 matmul.
COLLAPSE_PROBLEM = '''
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x, w):
        return (x @ w).sum().reshape(1)


def get_inputs():
    return [torch.rand(512, 512), torch.rand(512, 512)]


def get_init_inputs():
    return []
'''
COLLAPSE_CANDIDATE = '''
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x, w):
        return (x.sum(0) @ w.sum(1)).reshape(1)
'''


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_a_passing_evaluation_states_its_floor_and_the_peaks_are_measured_once(tmp_path: Path) -> None:
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    async with Evaluator(tmp_path, FAST, toolchain_dir=shared_toolchain()) as ev:
        first = await ev.evaluate(problem, fixture_text("torch_ok.py"), device="cpu")
        collapse = await ev.evaluate(
            problem_from_source(COLLAPSE_PROBLEM, "collapse"), COLLAPSE_CANDIDATE, device="cpu"
        )
    assert first.status is Status.PASSED and first.sol is not None
    sol = first.sol
    floor = sol.shapes[0].floor
    assert (floor.input_bytes, floor.output_bytes) == (2 * 128 * 512 * 4, 128 * 512 * 4)
    assert floor.flops == {"pointwise": 2.0 * 128 * 512}
    assert sol.bound == "memory" and sol.compute_peak == "fp32"
    assert sol.time_ms == pytest.approx(first.runtime.median_ms)
    assert sol.fraction == pytest.approx(sol.floor_ms / first.runtime.median_ms)
    assert sol.peaks.source == "measured" and sol.peaks.kind == "cpu" and sol.peaks.threads == 1
    assert "sol" in first.phase_seconds
    # An honest algebraic rewrite beats the reference's roofline: flagged for a reader, never rejected.
    assert collapse.status is Status.PASSED, collapse.message
    assert collapse.sol is not None and collapse.sol.bound == "compute"
    assert collapse.sol.beyond_roofline and not collapse.sol.below_floor
    assert "beyond_reference_roofline" in collapse.flags

    # A second evaluator on the same cache asks no worker to calibrate or count again.
    asked: list[str] = []
    async with Evaluator(tmp_path, FAST, toolchain_dir=shared_toolchain()) as ev:
        original = ev.devices.command

        async def spy(info, problem, settings, frame, *args, **kwargs):
            asked.append(frame.NAME)
            return await original(info, problem, settings, frame, *args, **kwargs)

        ev.devices.command = spy  # type: ignore[method-assign]
        again = await ev.evaluate(problem, fixture_text("torch_ok.py"), device="cpu", use_cache=False)
    assert asked == ["evaluate"]
    assert again.sol is not None and again.sol.peaks == sol.peaks


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_a_time_below_the_output_write_floor_is_rejected_whatever_else_passed(tmp_path: Path) -> None:
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    async with Evaluator(tmp_path, FAST, toolchain_dir=shared_toolchain()) as ev:
        info = await ev.device_info("cpu")
        # A machine whose memory writes 1 MB/s: writing relu_sum's 256 KiB output takes ~0.2 s,
        # far beyond any time the candidate is measured at, so the time of record is impossible.
        ev.sol.peaks_cache.store(
            Peaks(device_name=info.name, kind="cpu", bandwidth_bytes_per_s=1e6, fp32_flops_per_s=1e9,
                  cache_bytes=0, method="seeded by the test"),
            peaks_version(info.torch_version, stack_tag(await ev.devices.dependencies(problem, info, FAST))),
        )
        evaluation = await ev.evaluate(problem, fixture_text("torch_ok.py"), device="cpu")
    assert evaluation.status is Status.REJECTED
    assert evaluation.reason == "below_physical_floor"
    assert "impossible time" in evaluation.message and "below_physical_floor" in evaluation.flags
    assert evaluation.sol is not None and evaluation.sol.below_floor
    assert evaluation.correctness is not None and evaluation.correctness.trials_passed > 0
