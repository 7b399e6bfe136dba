"""Launch-bound shapes timed in batches: the rule for the batch size, figures per call, the batch's
wire format, and real CPU evaluations forced into batches (the GPU batches by the rule; the CPU
only when told to, so the same machinery is tested here)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from stark_mcp.evaluator.common import control
from stark_mcp.evaluator.common.control import ControlError
from stark_mcp.evaluator.settings import CPU_TOLERANCES, GPU_TOLERANCES, EvalSettings
from stark_mcp.evaluator.trusted import timing
from stark_mcp.evaluator.trusted.driver import batch_metas
from stark_mcp.evaluator.trusted.worker import BATCH_MEMORY_BYTES, _session_settings, batch_capacity
from stark_mcp.records import Status
from tests.evaluator.conftest import FAST, evaluate_fixture

GPU = GPU_TOLERANCES


# -- the rule for k ------------------------------------------------------------------------------
def _k(per_call_ms: float, capacity: int = 64) -> int:
    return timing.batch_size(per_call_ms, GPU.batch_below_ms, GPU.batch_ms, capacity)


def test_launch_bound_calls_go_in_batches_of_about_a_millisecond() -> None:
    assert _k(0.004) == 64  # a few microseconds: as many as the regions hold
    assert _k(0.05) == 20  # 20 x 0.05 ms = 1 ms
    assert _k(0.19) == 6
    assert _k(0.004, capacity=8) == 8
    assert _k(0.0) == 64  # a call the trusted clock cannot see at all


@pytest.mark.parametrize("per_call_ms", [0.2, 0.5, 1.5, 40.0])
def test_calls_that_are_not_launch_bound_stay_single(per_call_ms: float) -> None:
    # Where the slack's 0.04 ms floor is at most a fifth of the figure, every call is a GO of its own,
    # as before: a KernelBench level-1 matmul or convolution of a millisecond is never batched.
    assert _k(per_call_ms) == 1


def test_no_batches_without_room_or_on_the_cpu() -> None:
    assert _k(0.004, capacity=1) == 1
    assert timing.batch_size(0.004, CPU_TOLERANCES.batch_below_ms, CPU_TOLERANCES.batch_ms, 64) == 1


def test_a_warm_up_made_slow_on_purpose_is_caught_by_the_timed_calls() -> None:
    # Single calls timed at 0.15 ms a call (the warm-up said 0.3): launch-bound after all, timed
    # again at the largest batch, so slowing down in the second pass only slows its own figure.
    assert timing.rebatch(1, 0.15, GPU.batch_below_ms, GPU.batch_ms, 64) == 64
    assert timing.rebatch(1, 0.3, GPU.batch_below_ms, GPU.batch_ms, 64) == 1
    # Batches of 20 planned for 1 ms that held 0.1 ms: again, at 64.
    assert timing.rebatch(20, 0.005, GPU.batch_below_ms, GPU.batch_ms, 64) == 64
    assert timing.rebatch(20, 0.04, GPU.batch_below_ms, GPU.batch_ms, 64) == 20
    assert timing.rebatch(64, 0.001, GPU.batch_below_ms, GPU.batch_ms, 64) == 64  # nothing larger
    assert timing.rebatch(1, 0.001, 0.0, GPU.batch_ms, 64) == 1  # batching off


# -- the figure of record --------------------------------------------------------------------------
HARNESS_MS = 0.12  # the harness's share of one GO's bracket


def _samples(rng: random.Random, true_ms: float, k: int, report, n: int = 40) -> timing.Samples:
    s = timing.Samples()
    for _ in range(n):
        work = k * true_ms + rng.gauss(0, 0.001)
        s.add(int(report(work) * 1e6), int((work + HARNESS_MS + rng.gauss(0, 0.001)) * 1e6))
    return s


def _per_call_figure(true_ms: float, k: int, report, seed: int = 1) -> timing.Figure:
    rng = random.Random(seed)
    base = _samples(rng, 0.005, k, lambda w: w, n=80)
    cand = _samples(rng, true_ms, k, report)
    over = timing.overhead(base)
    fig = timing.bounded(cand, over, GPU.abs_slack_ms, GPU.rel_slack, GPU.forged_gap_ms, batch=k)
    return timing.per_call(fig, k)


def test_a_report_of_zero_on_a_launch_bound_call_is_believed_unbatched_and_bounded_in_batches() -> None:
    # The hole: 4 us a call, a report of zero is within the 0.04 ms floor of the trusted figure, so
    # it is the figure of record (an infinite speedup). In batches of 64 the floor bounds 0.26 ms of
    # work: the report loses the benefit of the doubt and the trusted figure, per call, is used.
    single = _per_call_figure(0.004, 1, lambda w: 0.0)
    assert single.source == "reported" and single.reported_ms == 0.0
    batched = _per_call_figure(0.004, 64, lambda w: 0.0)
    assert batched.source == "external" and batched.external_ms == pytest.approx(0.004, rel=0.1)
    assert statistics_median(batched.samples_ms) >= 0.9 * 0.004


@pytest.mark.parametrize("shave", [0.95, 0.9, 0.85, 0.8])
def test_in_batches_a_shaved_report_gains_a_share_not_the_floor(shave: float) -> None:
    fig = _per_call_figure(0.004, 64, lambda w: w * shave)
    assert statistics_median(fig.samples_ms) >= 0.004 * (1 - GPU.abs_slack_ms / (64 * 0.004)) - 1e-6


def test_an_honest_batch_gives_its_per_call_report() -> None:
    fig = _per_call_figure(0.004, 64, lambda w: w)
    assert fig.source == "reported" and not fig.forged
    assert fig.reported_ms == pytest.approx(0.004, rel=0.02)
    assert fig.overhead_ms == pytest.approx(HARNESS_MS / 64, rel=0.1)
    assert fig.slack_ms == pytest.approx(GPU.abs_slack_ms / 64)


def test_per_call_divides_every_figure_and_leaves_single_calls_alone() -> None:
    fig = timing.Figure([6.4, 12.8], 6.4, 6.4, 1.28, "reported", ["x"], False, 0.64)
    each = timing.per_call(fig, 64)
    assert each.samples_ms == [0.1, 0.2] and each.reported_ms == 0.1 and each.external_ms == 0.1
    assert each.overhead_ms == pytest.approx(0.02) and each.slack_ms == pytest.approx(0.01)
    assert timing.per_call(fig, 1) is fig


def statistics_median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


# -- the wire -------------------------------------------------------------------------------------
def test_a_go_carries_its_batch_and_one_argument_list_per_call() -> None:
    block, fd = control.create()
    try:
        worker, runner = control.WorkerSide(block), control.RunnerSide(block)
        worker.go(3, 1, 0, [[1], [2], [3]], count=3)
        assert runner.go() == (3, 1, 0, [[1], [2], [3]], 3)
        worker.go(4, 0, 1, [0.5])
        assert runner.go() == (4, 0, 1, [0.5], 1)
        with pytest.raises(ValueError):
            worker.go(5, 0, 0, [], count=0)
    finally:
        block.close()
        import os

        os.close(fd)


def test_a_batch_done_must_describe_every_call() -> None:
    entries = [{"out": {"k": "tensor", "leaf": 0}, "flags": []} for _ in range(3)]
    metas = batch_metas({"ok": True, "batch": entries, "jit": 2}, 3)
    assert [m["ok"] for m in metas] == [True] * 3 and all(m["jit"] == 2 for m in metas)
    assert metas[1]["out"] == entries[1]["out"]
    for bad in (
        {"ok": True},
        {"ok": True, "batch": entries[:2]},
        {"ok": True, "batch": [*entries[:2], "x"]},
        {"ok": True, "batch": {"0": entries[0]}},
    ):
        with pytest.raises(ControlError):
            batch_metas(bad, 3)
    failed = {"ok": False, "status": "runtime_error", "reason": "exception", "message": "boom"}
    assert batch_metas(failed, 3) == [failed] * 3  # judged as a failed call


# -- room for batches ------------------------------------------------------------------------------
@dataclass
class _Shape:
    input_bytes: int
    output_bytes: int
    outputs: list[Any] = field(default_factory=lambda: [([256, 256], "float32")])
    output_tree: dict[str, Any] = field(default_factory=lambda: {"k": "tensor", "leaf": 0})


@dataclass
class _Problem:
    shapes: list[_Shape]


def test_the_regions_hold_batches_only_where_batching_is_on_and_memory_allows() -> None:
    tiny = _Problem([_Shape(512 << 10, 256 << 10)])
    gpu = _session_settings(EvalSettings().worker_dict(), cuda=True)
    cpu = _session_settings(EvalSettings().worker_dict(), cuda=False)
    total = 141 << 30
    assert batch_capacity(tiny, gpu, total) == 64
    assert batch_capacity(tiny, cpu, total) == 1  # the CPU's calls stay single unless forced
    forced = {**cpu, "force_batch": 8}
    assert batch_capacity(tiny, forced, total) == 8
    large = _Problem([_Shape(200 << 20, 100 << 20)])
    assert batch_capacity(large, gpu, total) == BATCH_MEMORY_BYTES // (300 << 20)
    assert batch_capacity(_Problem([_Shape(1 << 30, 1 << 30)]), gpu, total) == 1
    many = _Problem([_Shape(1 << 10, 1 << 10, outputs=[([4], "float32")] * 64, output_tree={"k": "seq"})])
    assert batch_capacity(many, gpu, total) < 64  # every call's description must fit one DONE


def test_the_batching_rule_is_part_of_the_cache_key() -> None:
    default = EvalSettings()
    other = EvalSettings(gpu_timing=GPU_TOLERANCES.model_copy(update={"max_batch": 16}))
    assert other.settings_hash != default.settings_hash
    off = EvalSettings(gpu_timing=GPU_TOLERANCES.model_copy(update={"batch_below_ms": 0.0}))
    assert off.settings_hash != default.settings_hash


# -- real CPU evaluations, forced into batches ----------------------------------------------------
def _forced(k: int, **changes: Any) -> EvalSettings:
    timing_settings = CPU_TOLERANCES.model_copy(update={"force_batch": k})
    return FAST.model_copy(update={"cpu_timing": timing_settings, **changes})


@pytest.mark.anyio
async def test_an_honest_candidate_in_batches_passes_with_figures_per_call(evaluator) -> None:
    single = await evaluate_fixture(evaluator, "relu_sum.py", "torch_ok.py", use_cache=False)
    batched = await evaluate_fixture(
        evaluator, "relu_sum.py", "torch_ok.py", settings=_forced(8), use_cache=False
    )
    assert single.status is Status.PASSED and batched.status is Status.PASSED, batched.message
    assert single.trust is not None and not any("batches of" in f for f in single.trust.findings)
    trust = batched.trust
    assert trust is not None and any("timed in batches of 8 calls" in f for f in trust.findings)
    assert trust.timed_calls >= 30 and trust.timed_calls % 8 == 0 and trust.timed_checked >= 3
    assert single.runtime is not None and batched.runtime is not None
    # Per call: the same forward, so the same figure within a loaded machine's noise, not 8x.
    ratio = batched.runtime.median_ms / single.runtime.median_ms
    assert 0.4 < ratio < 2.5, (single.runtime.median_ms, batched.runtime.median_ms)
    assert 0.4 < batched.speedups["eager"] < 2.5


CHEATS = [
    ("batch_wrong_some.py", Status.WRONG_OUTPUT, "inconsistent"),
    ("batch_guess_checked.py", Status.WRONG_OUTPUT, "inconsistent"),
    ("batch_bad_done.py", Status.RUNTIME_ERROR, "channel"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("candidate,status,reason", CHEATS, ids=[c[0] for c in CHEATS])
async def test_any_call_of_a_batch_may_be_the_checked_one(evaluator, candidate, status, reason) -> None:
    # Wrong on one call of each batch only, right on every single call: whichever call the worker
    # checks, after the batch's DONE, is as likely to be the wrong one. 25 batches at a check rate of
    # 0.4 miss every wrong call with a probability of 3e-6 (1e-4 for the guesser, which cheats less).
    settings = _forced(8, min_calls=200, check_rate=0.4, max_time_s=5.0)
    result = await evaluate_fixture(evaluator, "relu_sum.py", candidate, settings=settings, use_cache=False)
    assert (result.status, result.reason) == (status, reason), result.message
    assert "timing" in result.message or reason == "channel"


def test_hidden_cpu_is_charged_per_call_to_a_batch_sample() -> None:
    # CPU that processes which ended between two freezes used is spread over the window's calls; a
    # batch's sample holds its calls' shares, so a batch of 8 beside a single call takes 8 of 9.
    from stark_mcp.evaluator.sandbox.launch import JailCpu
    from stark_mcp.evaluator.trusted.session import WINDOW_ALLOWANCE_NS, CpuWindow

    cand = timing.Samples()
    window = CpuWindow()
    window.settle(JailCpu(1_000_000_000, {10: 1_000_000_000}), cand)
    window.calls = 9
    window.timed.append(len(cand.bracket_ms))
    window.batched[len(cand.bracket_ms)] = 8
    cand.add(800_000, 800_000)
    window.timed.append(len(cand.bracket_ms))
    cand.add(100_000, 100_000)
    hidden = 9 * 100_000
    window.settle(JailCpu(1_000_000_000 + hidden + WINDOW_ALLOWANCE_NS, {10: 1_000_000_000}), cand)
    assert cand.bracket_ms == pytest.approx([0.8 + 0.8, 0.1 + 0.1])
    assert window.charged_calls == 9 and window.batched == {}
