"""A first evaluation's fixed cost: the worker starts and loads the problem while the candidate
builds, and the problem's load starts its runners, so the evaluation's own ``process_start`` is
short even in a fresh evaluator (as in a one-off ``stark-mcp eval``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.problems import load_problem
from tests.toolchain import shared_toolchain

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"


async def test_the_worker_starts_under_the_build(tmp_path: Path) -> None:
    settings = EvalSettings(baselines=("eager",), min_time_s=0.005, max_time_s=0.3, build_timeout_s=600.0)
    async with Evaluator(tmp_path / "cache", settings, toolchain_dir=shared_toolchain()) as ev:
        evaluation = await ev.evaluate(
            load_problem(str(FIXTURES / "relu_sum.py")), (FIXTURES / "ext_ok.py").read_text(), device="cpu",
        )
        pool = await ev.worker_pool("cpu")
    assert evaluation.passed, evaluation.message
    phases = evaluation.phase_seconds
    build = phases["build"]
    # the worker's start (torch in a zygote, the problem's import and runners: 2-10 s here) was over
    # before the build was: what is left of it is small, and named
    left = phases["process_start"] + sum(v for k, v in phases.items() if k.startswith("waiting:"))
    assert build > left, phases
    assert phases["process_start"] < 1.0, phases
    assert [lease.outcome for lease in pool.history][:2] == ["ok", "ok"]  # the load, then the evaluation


async def test_an_uncached_evaluation_starts_its_worker_before_checking_the_candidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No build to hide it under: the worker's start is asked for as soon as the cache has no verdict,
    so it runs beside the dependencies, static checks and staging (a fresh ``eval --no-cache`` of a
    built candidate paid them, then the whole start, in series); a cached verdict starts nothing."""
    from stark_mcp.evaluator.host import candidate, devices
    from stark_mcp.evaluator.host.static_checks import StaticResult

    settings = EvalSettings(baselines=("eager",), min_time_s=0.005, max_time_s=0.3)
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    source = (FIXTURES / "torch_ok.py").read_text()
    held: list[list[str]] = []
    async with Evaluator(tmp_path / "cache", settings, toolchain_dir=shared_toolchain()) as ev:
        pool = await ev.worker_pool("cpu")

        def check(text: str, parsed: object = None) -> StaticResult:
            held.append([slot.job for slot in pool.live])  # what the device slots are doing by now
            return real(text, parsed)

        real = candidate.check_candidate  # what the evaluation's Candidate checks its source with
        monkeypatch.setattr(candidate, "check_candidate", check)
        evaluation = await ev.evaluate(problem, source, device="cpu")
        leases = len(pool.history)
        cached = await ev.evaluate(problem, source, device="cpu")
    assert evaluation.passed and cached.cached, evaluation.message
    assert held == [[devices.WARM_LABEL]]  # the worker was starting while the candidate was checked
    assert len(pool.history) == leases  # the cached verdict started and leased nothing
    phases = evaluation.phase_seconds
    # the wait for that start is the evaluation's process start, not a wait for other work
    assert phases["process_start"] > 0 and not any(k.startswith("waiting:") for k in phases), phases
    named = sum(v for k, v in phases.items() if k != "other")
    assert abs(named - evaluation.wall_seconds) <= 0.05 * evaluation.wall_seconds, phases
