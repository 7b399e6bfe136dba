"""The evaluator against real CUDA candidates: honest kernels, broken ones and cheats.

Every candidate in tests/fixtures/cuda is evaluated once, all of them concurrently, by one session
fixture: builds then run in parallel on the CPU pool while the evaluator serializes the device
phases itself. Each test then checks one verdict. After the faulting and hanging candidates have
finished, the correct elementwise candidate is evaluated again (result cache bypassed) to show the
GPU was left usable.

Each test records ``expected``, ``got``, ``seconds`` (sum of the evaluation's phases), ``wall_s``
(the await, queueing included) and ``median_ms`` as junit properties; tools/gpu_check.py prints
them as a table. Run: ``python3 tools/gpu_check.py`` or ``python3 -m pytest tests/gpu -m gpu -s``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.problems import Problem, load_problem
from stark_mcp.records import Evaluation, Status
from tests.timing_bounds import honest_timing_problem

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cuda"
# The in-context example the agents are shown must itself build and pass.
PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
DEVICE = "cuda"

# Short budgets where the defaults would only slow a failing run down; the infinite loop costs
# exactly CORRECTNESS_TIMEOUT_S of device time.
CORRECTNESS_TIMEOUT_S = 20.0
SETTINGS = EvalSettings(
    trials=3,
    baselines=("eager",),
    build_timeout_s=300.0,
    load_timeout_s=120.0,
    correctness_timeout_s=CORRECTNESS_TIMEOUT_S,
    timing_timeout_s=90.0,
    baseline_timeout_s=120.0,
    max_time_s=1.0,
    # Profiles and the sanitizer run after the verdict and cost 10-30 s each; tools/gpu_profiler.py
    # checks them. Here they would only eat the suite's budget.
    profile=False,
    sanitize=False,
)
# Everything (builds, ~10 device evaluations, the infinite loop's timeout) must end well inside the
# 300 s tools/gpu_check.py gives pytest; unfinished evaluations are cancelled and their tests fail.
TOTAL_BUDGET_S = 250.0
AFTER_FAULTS = "relu_add_fused_after_faults"


@dataclass(frozen=True)
class Case:
    candidate: str
    problem: str


CASES: dict[str, Case] = {
    "relu_add_fused": Case("cand_relu_add_fused.py", "problem_relu_add.py"),
    "matmul_naive": Case("cand_matmul_naive.py", "problem_matmul.py"),
    "compile_error": Case("cand_relu_add_compile_error.py", "problem_relu_add.py"),
    "illegal_access": Case("cand_relu_add_illegal_access.py", "problem_relu_add.py"),
    "infinite_loop": Case("cand_relu_add_infinite_loop.py", "problem_relu_add.py"),
    "empty_output": Case("cand_relu_add_empty_output.py", "problem_relu_add.py"),
    "side_stream": Case("cand_matmul_side_stream.py", "problem_matmul.py"),
    "collide_a": Case("cand_relu_add_collide_a.py", "problem_relu_add.py"),
    "collide_b": Case("cand_relu_add_collide_b.py", "problem_relu_add.py"),
    "tf32_sneaky": Case("cand_matmul_tf32_sneaky.py", "problem_matmul.py"),
    "fp16_downcast": Case("cand_matmul_fp16.py", "problem_matmul.py"),
    "prompt_example": Case(str(PROMPTS / "example_kernel_cuda.py"), str(PROMPTS / "example_reference.py")),
}
FAULTING = ("illegal_access", "infinite_loop")

Outcome = Evaluation | BaseException


def _log(message: str) -> None:
    # Progress lines keep a long device run from looking hung (gpu_check runs pytest with -s).
    print(f"[gpu-eval {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _describe(ev: Evaluation) -> str:
    median = f" median={ev.runtime.median_ms:.4f}ms" if ev.runtime else ""
    phases = {k: round(v, 1) for k, v in ev.phase_seconds.items()}
    return f"{ev.status.value}/{ev.reason}{median} phases={phases}"


async def _evaluate_all(cache_dir: Path, walls: dict[str, float]) -> dict[str, Outcome]:
    """Every case concurrently, then the correct candidate again; ``walls`` gets each call's wall time."""
    problems: dict[str, Problem] = {}
    for case in CASES.values():
        if case.problem not in problems:
            problems[case.problem] = load_problem(str(FIXTURES / case.problem))
    deadline = time.monotonic() + TOTAL_BUDGET_S
    outcomes: dict[str, Outcome] = {}

    async with Evaluator(cache_dir=cache_dir, settings=SETTINGS) as ev:

        async def one(key: str, case: Case, use_cache: bool = True) -> Evaluation:
            source = (FIXTURES / case.candidate).read_text(encoding="utf-8")
            t0 = time.monotonic()
            result = await ev.evaluate(
                problems[case.problem], source, device=DEVICE, settings=SETTINGS, use_cache=use_cache
            )
            walls[key] = time.monotonic() - t0  # includes queueing for build slots and the device
            _log(f"{key}: {_describe(result)} wall={walls[key]:.1f}s")
            return result

        tasks = {key: asyncio.create_task(one(key, case)) for key, case in CASES.items()}
        done, pending = await asyncio.wait(tasks.values(), timeout=max(1.0, deadline - time.monotonic()))
        for task in pending:
            task.cancel()
        for key, task in tasks.items():
            if task in pending:
                outcomes[key] = TimeoutError(f"{key} did not finish within the {TOTAL_BUDGET_S:.0f} s budget")
                continue
            exc = task.exception()
            outcomes[key] = exc if exc is not None else task.result()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

        # Runs strictly after the faulting candidates ended: the device lock is FIFO and they are done.
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 5:
                raise TimeoutError("no budget left for the evaluation after the faulting candidates")
            outcomes[AFTER_FAULTS] = await asyncio.wait_for(
                one(AFTER_FAULTS, CASES["relu_add_fused"], use_cache=False), timeout=remaining
            )
        except Exception as exc:  # recorded, then raised by the test that needs it
            outcomes[AFTER_FAULTS] = exc
    return outcomes


@pytest.fixture(scope="session")
def walls() -> dict[str, float]:
    return {}


@pytest.fixture(scope="session")
def outcomes(tmp_path_factory: pytest.TempPathFactory, walls: dict[str, float]) -> dict[str, Outcome]:
    cache_dir = tmp_path_factory.mktemp("stark-gpu-cache")
    _log(f"evaluating {len(CASES)} candidates on {torch.cuda.get_device_name(0)}; cache {cache_dir}")
    return asyncio.run(_evaluate_all(cache_dir, walls))


Verdict = Callable[..., Evaluation]


@pytest.fixture
def verdict(
    outcomes: dict[str, Outcome], walls: dict[str, float], record_property: Callable[[str, object], None]
) -> Verdict:
    """Fetch one evaluation; with ``expected``, record expected/got/seconds before any assert can fail."""

    def get(key: str, expected: str | None = None) -> Evaluation:
        outcome = outcomes[key]
        if expected is not None:
            record_property("expected", expected)
        if isinstance(outcome, BaseException):
            if expected is not None:
                record_property("got", f"error: {type(outcome).__name__}: {outcome}")
            raise outcome
        if expected is not None:
            record_property("got", f"{outcome.status.value}/{outcome.reason}")
            record_property("seconds", round(sum(outcome.phase_seconds.values()), 2))
            if key in walls:
                record_property("wall_s", round(walls[key], 1))
            if outcome.runtime is not None:
                record_property("median_ms", round(outcome.runtime.median_ms, 5))
        return outcome

    return get


def _text(ev: Evaluation) -> str:
    return (ev.message + "\n" + "\n".join(ev.logs.values())).lower()


def test_fused_elementwise_passes_with_own_kernels(verdict: Verdict) -> None:
    ev = verdict("relu_add_fused", "passed")
    assert ev.status is Status.PASSED, _text(ev)
    assert ev.reason is None
    assert ev.correctness is not None and ev.correctness.trials_passed == ev.correctness.trials >= 3 + 3
    assert ev.trust is not None and ev.trust.isolation and ev.trust.baseline_side_by_side
    assert honest_timing_problem(ev) is None, honest_timing_problem(ev)
    assert ev.runtime is not None and ev.runtime.median_ms > 0
    assert "eager" in ev.baselines and ev.speedups["eager"] > 0
    assert ev.own_kernel_share is not None and ev.own_kernel_share >= 0.9
    assert "low_own_kernel_share" not in ev.flags
    assert ev.device == "cuda" and ev.device_name


def test_naive_matmul_passes(verdict: Verdict) -> None:
    ev = verdict("matmul_naive", "passed")
    assert ev.status is Status.PASSED, _text(ev)
    assert ev.correctness is not None and ev.correctness.rel_norm_error is not None
    assert ev.correctness.tolerance is not None
    assert ev.correctness.rel_norm_error <= ev.correctness.tolerance
    assert ev.runtime is not None and ev.runtime.median_ms > 0
    assert "implausible_speedup" not in ev.flags


def test_compile_error_is_a_build_error(verdict: Verdict) -> None:
    ev = verdict("compile_error", "build_error/compile")
    assert ev.status is Status.BUILD_ERROR, _text(ev)
    assert ev.reason == "compile"
    assert "undeclared_scale" in _text(ev)
    assert ev.runtime is None


def test_illegal_memory_access_is_a_runtime_error(verdict: Verdict) -> None:
    ev = verdict("illegal_access", "runtime_error/exception")
    assert ev.status is Status.RUNTIME_ERROR, _text(ev)
    assert ev.reason in ("exception", "signal")
    if ev.reason == "exception":
        assert "illegal memory access" in _text(ev)


def test_infinite_loop_times_out(verdict: Verdict) -> None:
    ev = verdict("infinite_loop", "timeout/correctness")
    assert ev.status is Status.TIMEOUT, _text(ev)
    assert ev.reason == "correctness"
    # Ended at its budget, not long after; that the kill freed the GPU is checked further down.
    assert CORRECTNESS_TIMEOUT_S - 1 <= ev.phase_seconds["correctness"] <= CORRECTNESS_TIMEOUT_S + 15


def test_untouched_empty_output_does_not_pass(verdict: Verdict) -> None:
    ev = verdict("empty_output", "wrong_output/nonfinite")
    assert ev.status is Status.WRONG_OUTPUT, _text(ev)
    # NaN from the poisoned pool; a fresh zeroed segment would fail the tolerance instead.
    assert ev.reason in ("nonfinite", "tolerance")


def test_side_stream_gets_no_fake_speedup(verdict: Verdict) -> None:
    honest = verdict("matmul_naive")
    ev = verdict("side_stream", "passed, time >= 2/3 of honest")
    assert honest.status is Status.PASSED and honest.runtime is not None
    # Passing with the honest time is the documented outcome: the trusted bracket waits for every
    # stream (the runner's device-wide sync, then our fence). Reading the output before the side stream
    # finished would be a wrong_output, also safe. A fake 10-100x speedup is what this test exists for.
    assert ev.status in (Status.PASSED, Status.WRONG_OUTPUT), _text(ev)
    if ev.status is Status.PASSED:
        assert ev.runtime is not None
        apparent = honest.runtime.median_ms / ev.runtime.median_ms
        assert apparent <= 1.5, f"side stream looks {apparent:.1f}x faster than the same kernel joined"
        assert ev.speedups["eager"] <= 1.5 * honest.speedups["eager"]
        assert "implausible_speedup" not in ev.flags
        # Its own events saw only the current stream; the trusted clock saw the work.
        assert "timing_mismatch" in ev.flags, _text(ev)
        assert honest_timing_problem(honest) is None, honest_timing_problem(honest)


def test_same_name_half_a_runs_its_own_kernel(verdict: Verdict) -> None:
    good = verdict("collide_a", "passed")
    bad = verdict("collide_b")
    assert good.status is Status.PASSED, _text(good)
    # Half B must also have been judged on its own library, or A may have run B's kernel.
    assert bad.status is Status.WRONG_OUTPUT


def test_same_name_half_b_runs_its_own_kernel(verdict: Verdict) -> None:
    bad = verdict("collide_b", "wrong_output/tolerance")
    good = verdict("collide_a")
    assert bad.status is Status.WRONG_OUTPUT, _text(bad)
    assert bad.reason == "tolerance"
    assert good.status is Status.PASSED


def test_gpu_is_usable_after_fault_and_hang(verdict: Verdict, outcomes: dict[str, Outcome]) -> None:
    for key in FAULTING:
        assert isinstance(outcomes[key], Evaluation), f"{key} did not produce a verdict"
    ev = verdict(AFTER_FAULTS, "passed (fresh, not cached)")
    assert ev.status is Status.PASSED, _text(ev)
    assert not ev.cached
    first = outcomes["relu_add_fused"]
    assert isinstance(first, Evaluation) and first.runtime is not None and ev.runtime is not None
    # Same kernel, same device: a GPU still busy with a leftover spinning kernel would show here.
    assert ev.runtime.median_ms <= 2.0 * first.runtime.median_ms


def test_prompt_in_context_example_kernel_passes(verdict: Verdict) -> None:
    ev = verdict("prompt_example", "passed")
    assert ev.status is Status.PASSED, _text(ev)


def test_tf32_hidden_behind_a_restored_flag_fails_the_precision_contract(verdict: Verdict) -> None:
    ev = verdict("tf32_sneaky", "wrong_output/tolerance")
    assert (ev.status, ev.reason) == (Status.WRONG_OUTPUT, "tolerance"), _text(ev)
    assert ev.correctness is not None and ev.correctness.rel_norm_error > ev.correctness.tolerance


def test_fp16_downcast_fails_the_precision_contract(verdict: Verdict) -> None:
    ev = verdict("fp16_downcast", "wrong_output/tolerance")
    assert (ev.status, ev.reason) == (Status.WRONG_OUTPUT, "tolerance"), _text(ev)
