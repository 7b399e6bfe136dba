"""Profiles taken in the background on a GPU: the reference's after create_run (one per problem and
device, shared by every run of that problem), and each passing attempt's after add_child returned
(GPU profiles themselves: tools/gpu_profiler.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stark_mcp.config import Settings
from stark_mcp.evaluator import EvalSettings
from stark_mcp.evaluator.host import profile_reports
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.problems import problem_from_source, source_hash
from stark_mcp.records import Evaluation, Status, TimingStats
from stark_mcp.store import Store

from .replies import FUSED, PROBLEM, WRONG

pytestmark = pytest.mark.anyio


class SlowProfiler:
    """Stands in for the evaluator's ``profile`` (Nsight Compute needs a GPU): slow, and counted."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def profile(self, problem, source, device="auto", settings=None, progress=None):
        self.calls.append(problem.hash)
        await asyncio.sleep(0.3)
        return profile_reports.unavailable(f"profile #{len(self.calls)} of {problem.name}")


def _root() -> Evaluation:
    stats = TimingStats(median_ms=1.0, iqr_ms=0.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, samples=5)
    return Evaluation(status=Status.PASSED, runtime=stats)


async def test_runs_of_one_problem_share_one_reference_profile(tmp_path: Path) -> None:
    same = problem_from_source(PROBLEM, name="p")
    other = problem_from_source(PROBLEM + "\n# another problem\n", name="q")
    profiler = SlowProfiler()
    settings = EvalSettings()
    async with await Store.open(Settings(home=tmp_path).database) as store:
        service = RunService(store, profiler)  # type: ignore[arg-type]
        runs = [
            await store.create_run(problem=problem, device="cuda", policy={}, budget=3, seed=1,
                                   root_evaluation=_root())
            for problem in (same, same, other)
        ]  # fmt: skip
        for run in runs[:2]:
            service._start_reference_profile(run, settings)
        await asyncio.sleep(0.5)  # the first profile is done; a later run of the problem reuses it
        service._start_reference_profile(runs[2], settings)
        service._start_reference_profile(runs[0].model_copy(), settings)
        while service._background:
            await asyncio.sleep(0.05)
        shown = [(await service.node(run.id, "n0")).evaluation.profile for run in runs]
        await service.aclose()
    assert profiler.calls == [same.hash, other.hash]
    assert shown[0] == shown[1] and shown[0].reason == "profile #1 of p"
    assert shown[2].reason == "profile #2 of q"


async def test_a_failed_reference_profile_is_taken_again_by_the_next_run(tmp_path: Path) -> None:
    class Failing(SlowProfiler):
        async def profile(self, problem, source, device="auto", settings=None, progress=None):
            self.calls.append(problem.hash)
            if len(self.calls) == 1:
                raise RuntimeError("the machine said no")
            return profile_reports.unavailable("second try")

    profiler = Failing()
    problem = problem_from_source(PROBLEM, name="p")
    async with await Store.open(Settings(home=tmp_path).database) as store:
        service = RunService(store, profiler)  # type: ignore[arg-type]
        runs = [
            await store.create_run(problem=problem, device="cuda", policy={}, budget=3, seed=1,
                                   root_evaluation=_root())
            for _ in range(2)
        ]  # fmt: skip
        service._start_reference_profile(runs[0], EvalSettings())
        while service._background:
            await asyncio.sleep(0.05)
        service._start_reference_profile(runs[1], EvalSettings())
        while service._background:
            await asyncio.sleep(0.05)
        first, second = [(await service.node(run.id, "n0")).evaluation.profile for run in runs]
        await service.aclose()
    assert len(profiler.calls) == 2
    assert first is None and second.reason == "second try"


class HeldProfiler(SlowProfiler):
    """An executor on a GPU whose profiles finish only when the test says so."""

    settings = EvalSettings()

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.evaluated_with: list[EvalSettings | None] = []

    async def evaluate(self, problem, source, device="auto", settings=None, progress=None, use_cache=True,
                       wait_for_baselines=True):
        self.evaluated_with.append(settings)
        source = getattr(source, "source", source)  # RunService hands executors a Candidate
        status = Status.PASSED if source == FUSED else Status.WRONG_OUTPUT
        return Evaluation(status=status, runtime=_root().runtime if status is Status.PASSED else None,
                          device="cuda", problem_hash=problem.hash, source_hash=source_hash(source))

    async def profile(self, problem, source, device="auto", settings=None, progress=None):
        source = getattr(source, "source", source)
        self.calls.append(source)
        await self.release.wait()
        return profile_reports.unavailable(f"profile of {source_hash(source)[:8]}")


async def _gpu_run(store: Store, profiler: HeldProfiler):
    service = RunService(store, profiler)  # type: ignore[arg-type]
    run = await store.create_run(problem=problem_from_source(PROBLEM, name="p"), device="cuda", policy={},
                                 budget=5, seed=1, root_evaluation=_root())
    return service, run


async def test_a_passing_attempt_is_profiled_after_add_child_returns_and_roles_wait_for_it(tmp_path) -> None:
    profiler = HeldProfiler()
    async with await Store.open(Settings(home=tmp_path).database) as store:
        service, run = await _gpu_run(store, profiler)
        node = await service.add_child(run.id, "n0", FUSED)  # returns while its profile is held
        failed = await service.add_child(run.id, "n0", WRONG)
        assert node.evaluation.passed and node.evaluation.profile is None
        assert [s.profile for s in profiler.evaluated_with] == [False, False]  # not inside the evaluation
        assert profiler.calls == [FUSED]  # a failing attempt has no kernels worth profiling

        context = asyncio.create_task(service.build_context(run.id, node.id, "plan"))
        await asyncio.sleep(0.2)
        assert not context.done(), "the planner's context was built without the attempt's profile"
        profiler.release.set()
        await context
        shown = (await service.node(run.id, node.id)).evaluation.profile
        assert shown is not None and shown.reason == f"profile of {source_hash(FUSED)[:8]}"
        assert (await service.node(run.id, failed.id)).evaluation.profile is None
        await service.aclose()


async def test_closing_drops_a_profile_still_being_taken(tmp_path) -> None:
    profiler = HeldProfiler()
    async with await Store.open(Settings(home=tmp_path).database) as store:
        service, run = await _gpu_run(store, profiler)
        node = await service.add_child(run.id, "n0", FUSED)
        await asyncio.sleep(0)
        await service.aclose()  # must not wait for the held profile
        assert profiler.calls == [FUSED] and not service._node_profiles
        assert (await service.node(run.id, node.id)).evaluation.profile is None
