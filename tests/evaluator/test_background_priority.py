"""Background work (a run's late compile baselines, its attempts' profiles) never delays an
evaluation: the pool's priority on its own, then through a real evaluator whose only CPU worker is
busy timing a torch.compile baseline."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.evaluator.host.priority import background, in_background
from stark_mcp.evaluator.host.slot_pool import MAX_PREEMPTIONS, Slot, SlotPool
from stark_mcp.problems import load_problem
from tests.toolchain import shared_toolchain

pytestmark = pytest.mark.anyio
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def one_slot() -> SlotPool[str]:
    return SlotPool([Slot("dev:0", "dev0")], what="test slot")


async def test_a_foreground_job_stops_background_work_and_it_starts_again_after() -> None:
    pool = one_slot()
    runs: list[str] = []
    release = asyncio.Event()

    async def slow_background(handle: str) -> str:
        runs.append("background started")
        await release.wait()
        return "background done"

    async def quick(handle: str) -> str:
        return "evaluation done"

    waits: list[tuple[str, float]] = []
    behind = asyncio.create_task(pool.run(slow_background, label="baseline compile_default", background=True))
    await asyncio.sleep(0.05)
    assert runs == ["background started"]
    started = time.monotonic()
    answer = await pool.run(quick, waited=lambda what, s: waits.append((what, s)))
    assert answer == "evaluation done" and time.monotonic() - started < 0.5
    assert [what for what, _ in waits] == ["baseline compile_default"]  # named, and short
    assert not behind.done()
    await asyncio.sleep(0.05)
    assert runs == ["background started"] * 2  # started again once the slot was free
    release.set()
    assert await behind == "background done"
    outcomes = [lease.outcome for lease in pool.history]
    assert outcomes == ["preempted", "ok", "ok"]


async def test_background_work_waits_while_a_foreground_job_waits_and_runs() -> None:
    pool = one_slot()
    order: list[str] = []
    gate = asyncio.Event()

    async def first(handle: str) -> None:
        order.append("first")
        await gate.wait()

    async def job(name: str):
        async def run(handle: str) -> None:
            order.append(name)
        return run

    holder = asyncio.create_task(pool.run(first))
    await asyncio.sleep(0.01)
    behind = asyncio.create_task(pool.run(await job("background"), background=True))
    await asyncio.sleep(0.01)
    front = asyncio.create_task(pool.run(await job("evaluation")))
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(holder, behind, front)
    assert order == ["first", "evaluation", "background"]


async def test_background_work_stopped_often_enough_keeps_its_slot() -> None:
    """A device that is never idle cannot starve a profile forever."""
    pool = one_slot()
    starts = 0

    async def background_job(handle: str) -> str:
        nonlocal starts
        starts += 1
        await asyncio.sleep(0.2)
        return "kept"

    async def quick(handle: str) -> None:
        await asyncio.sleep(0.01)

    behind = asyncio.create_task(pool.run(background_job, background=True))
    for _ in range(MAX_PREEMPTIONS + 1):
        await asyncio.sleep(0.03)
        await pool.run(quick)
    assert await behind == "kept" and starts == MAX_PREEMPTIONS + 1


async def test_cancelling_background_work_is_not_taken_for_a_preemption() -> None:
    pool = one_slot()

    async def forever(handle: str) -> None:
        await asyncio.sleep(60)

    behind = asyncio.create_task(pool.run(forever, background=True))
    await asyncio.sleep(0.02)
    behind.cancel()
    with pytest.raises(asyncio.CancelledError):
        await behind
    assert not pool.slots[0].busy and [lease.outcome for lease in pool.history] == ["cancelled"]


async def test_the_background_mark_reaches_tasks_started_inside_it() -> None:
    async def mark() -> bool:
        return in_background()

    with background():
        inside = asyncio.create_task(mark())
    outside = asyncio.create_task(mark())
    assert await inside is True and await outside is False


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_an_evaluation_never_waits_for_a_compile_baseline(tmp_path: Path) -> None:
    """The only CPU worker times torch.compile (tens of seconds on a 2-core machine) in the
    background, as after create_run; an evaluation arriving meanwhile takes the device at once
    (its worker is started again), and the baseline is timed after it."""
    settings = EvalSettings(baselines=("eager", "compile_default"), min_time_s=0.005, max_time_s=0.3,
                            correctness_timeout_s=60.0, load_timeout_s=60.0)
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    candidate = (FIXTURES / "torch_ok.py").read_text()
    async with Evaluator(tmp_path / "cache", settings, toolchain_dir=shared_toolchain()) as ev:
        await ev.check_problem(problem, device="cpu")  # a warm worker, as after create_run's eager
        # create_run also states the root's speed of light, so the problem's counts and the device's
        # peaks are cached before its compile baselines start (each is a job of its own on the slot).
        warm = await ev.evaluate(problem, candidate, device="cpu", use_cache=False,
                                 settings=settings.model_copy(update={"baselines": ("eager",)}))
        assert warm.passed and warm.sol is not None, warm.message
        with background():
            late = asyncio.create_task(
                ev.baseline_shapes(problem, device="cpu", which=["compile_default"])
            )
        pool = await ev.worker_pool("cpu")
        deadline = time.monotonic() + 60
        while pool.slots[0].job != "baseline compile_default" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # well inside torch.compile's first call
        assert pool.slots[0].busy and not late.done()
        evaluation = await ev.evaluate(problem, candidate, device="cpu", use_cache=False,
                                       wait_for_baselines=False)
        assert evaluation.passed, evaluation.message
        assert not late.done(), "the evaluation waited for the baseline"
        assert "baseline_pending:compile_default" in evaluation.flags
        phases = evaluation.phase_seconds
        waited = {k: v for k, v in phases.items() if k.startswith("waiting:")}
        assert list(waited) == ["waiting:baseline compile_default"] and waited[
            "waiting:baseline compile_default"] < 5.0, phases
        assert phases["transfer"] < 1.0, phases  # the wait is named, not booked as frames
        per_shape = await asyncio.wait_for(late, 600)  # timed again, after the evaluation
        assert "compile_default" in per_shape
        outcomes = [lease.outcome for lease in pool.history]
        assert "preempted" in outcomes
