"""The benchmark's metrics on hand-made rows, against numbers computed by hand."""

from __future__ import annotations

import math

import pytest

from stark_mcp.bench.metrics import (
    all_metrics,
    baseline_mode,
    best_so_far,
    best_so_far_curve,
    group_metrics,
    row_speedup,
)
from stark_mcp.bench.rows import AttemptRow, ResultRow
from stark_mcp.records import Usage


def attempt(
    i: int,
    status: str,
    runtime: float | None = None,
    eager: float | None = None,
    compile_: float | None = None,
    allclose: bool | None = None,
) -> AttemptRow:
    speedups = {k: v for k, v in (("eager", eager), ("compile_default", compile_)) if v is not None}
    return AttemptRow(
        node_id=f"n{i}",
        parent_id="n0",
        action="plan",
        status=status,
        runtime_ms=runtime,
        speedups=speedups,
        allclose_1e2=allclose,
    )


def row(
    key: str,
    attempts: list[AttemptRow],
    *,
    level: int | None = 1,
    strategy: str = "stark",
    baselines: tuple[str, ...] = ("eager", "compile_default"),
    cost: float = 0.0,
    wall: float = 0.0,
    budget: int = 3,
) -> ResultRow:
    passed = [a for a in attempts if a.status == "passed"]
    best = min(passed, key=lambda a: a.runtime_ms or math.inf) if passed else None
    return ResultRow(
        bench_id="b-test",
        pair=f"{key}:{strategy}",
        key=key,
        name=key,
        level=level,
        problem_id=None,
        strategy=strategy,
        run_id=f"r-{key}",
        device="cpu",
        status="finished",
        complete=len(attempts) >= budget,
        budget=budget,
        attempts=attempts,
        baselines_ms={b: 1.0 for b in baselines},
        best_node_id=best.node_id if best else None,
        best_runtime_ms=best.runtime_ms if best else None,
        speedups=dict(best.speedups) if best else {},
        usage=Usage(input_tokens=100, output_tokens=20, cost_usd=cost, calls=2),
        wall_s=wall,
    )


# Three problems of one level and strategy:
#   A: fails, then passes at 2.0x eager (1.5x compile), then a slower pass.
#   B: passes at once, 0.5x eager (0.25x compile).
#   C: never correct: a build error, a wrong output that allclose(1e-2) accepts, a rejected one it does not.
A = row(
    "A",
    [
        attempt(1, "runtime_error"),
        attempt(2, "passed", 1.0, 2.0, 1.5, True),
        attempt(3, "passed", 1.5, 4 / 3, 1.0, True),
    ],
    cost=0.3,
    wall=10.0,
)
B = row(
    "B",
    [attempt(1, "passed", 4.0, 0.5, 0.25, True), attempt(2, "load_error"), attempt(3, "timeout")],
    cost=0.1,
    wall=20.0,
)
C = row(
    "C",
    [
        attempt(1, "build_error"),
        attempt(2, "wrong_output", allclose=True),
        attempt(3, "rejected", allclose=False),
    ],
    cost=0.2,
    wall=30.0,
)


def test_group_metrics_match_the_hand_computation() -> None:
    m = group_metrics("1", "stark", [A, B, C])
    assert (m.problems, m.complete, m.solved) == (3, 3, 2)
    assert m.success_rate == pytest.approx(2 / 3)
    # KernelBench's verdict also accepts C's wrong output: every problem "succeeds" under allclose(1e-2).
    assert m.success_rate_allclose == pytest.approx(1.0)
    assert m.rejected_allclose_ok == 1
    # eager figures: A 2.0, B 0.5, C unsolved -> 1.0
    assert m.fast_p["eager"] == pytest.approx({"1": 1 / 3, "1.5": 1 / 3, "2": 0.0})  # 2.0 is not above 2
    assert m.geomean_speedup["eager"] == pytest.approx(1.0)  # (2 * 0.5 * 1) ** (1/3)
    assert m.mean_speedup["eager"] == pytest.approx(3.5 / 3)
    assert m.geomean_speedup_correct["eager"] == pytest.approx(1.0)  # sqrt(2 * 0.5)
    assert m.mean_speedup_correct["eager"] == pytest.approx(1.25)
    # compile figures: A 1.5, B 0.25, C 1.0
    assert m.fast_p["compile_default"] == pytest.approx({"1": 1 / 3, "1.5": 0.0, "2": 0.0})
    assert m.geomean_speedup["compile_default"] == pytest.approx((1.5 * 0.25) ** (1 / 3))
    assert m.baseline_problems == {"eager": 3, "compile_default": 3}
    # 9 attempts: 2 did not compile (build_error, load_error), 3 passed.
    assert m.attempts == 9
    assert m.compile_rate == pytest.approx(7 / 9)
    assert m.correct_rate == pytest.approx(3 / 9)
    assert m.attempts_to_first_correct == pytest.approx(1.5)  # A at 2, B at 1
    assert m.attempts_to_first_correct_median == pytest.approx(1.5)
    assert m.tokens == pytest.approx(120)
    assert m.cost_usd == pytest.approx(0.2) and m.total_cost_usd == pytest.approx(0.6)
    assert m.wall_s == pytest.approx(20.0) and m.total_wall_s == pytest.approx(60.0)


def test_a_problem_without_a_baseline_is_left_out_of_that_baselines_figures() -> None:
    D = row("D", [attempt(1, "passed", 1.0, 3.0)], baselines=("eager",), budget=1)
    m = group_metrics("1", "stark", [A, D])
    assert m.baseline_problems == {"eager": 2, "compile_default": 1}
    assert m.fast_p["compile_default"]["1"] == pytest.approx(1.0)  # only A counts, 1.5x
    assert m.geomean_speedup["eager"] == pytest.approx(math.sqrt(2.0 * 3.0))
    assert row_speedup(D, "compile_default") is None


def test_levels_and_strategies_are_grouped_with_an_all_levels_group() -> None:
    rows = [
        A,
        B,
        row("E", [attempt(1, "passed", 1.0, 3.0)], level=2),
        row("F", [], level=None, strategy="sampling"),
    ]
    metrics = all_metrics(rows)
    assert list(metrics) == ["1", "2", "custom", "all"]
    assert list(metrics["1"]) == ["stark"] and metrics["1"]["stark"].problems == 2
    assert metrics["custom"]["sampling"].problems == 1 and metrics["custom"]["sampling"].compile_rate is None
    assert metrics["all"]["stark"].problems == 3
    assert metrics["all"]["sampling"].success_rate == 0.0


def test_best_so_far_follows_the_fastest_correct_attempt() -> None:
    assert best_so_far(A, "eager", 3) == [1.0, 2.0, 2.0]  # the slower third pass does not lower it
    assert best_so_far(B, "eager", 4) == [0.5, 0.5, 0.5, 0.5]  # carried past its last attempt
    assert best_so_far(C, "eager", 3) == [1.0, 1.0, 1.0]
    curve = best_so_far_curve([A, B, C], "eager")
    assert curve == pytest.approx([0.5 ** (1 / 3), 1.0, 1.0])


def test_baseline_modes_follow_the_evaluators_naming_rule() -> None:
    assert baseline_mode("eager") == "eager PyTorch"
    assert baseline_mode("compile_default") == 'torch.compile(mode="default")'
    assert baseline_mode("compile_max_autotune") == 'torch.compile(mode="max-autotune")'
    assert (
        baseline_mode("compile_max_autotune_no_cudagraphs")
        == 'torch.compile(mode="max-autotune-no-cudagraphs")'
    )


def test_fast_layout_share_counts_attempts_with_cuda_extensions_only() -> None:
    from stark_mcp.bench.rows import cuda_layout

    assert cuda_layout([]) is None and cuda_layout([{"layout": "cpp"}]) is None
    assert cuda_layout([{"layout": "fast"}, {"layout": "cpp"}]) == "fast"
    assert cuda_layout([{"layout": "fast"}, {"layout": "torch_headers"}]) == "torch_headers"
    layouts = ["fast", "torch_headers", None, "fast", None]
    attempts = [
        attempt(i, "passed", 1.0, 1.0).model_copy(update={"layout": x}) for i, x in enumerate(layouts)
    ]
    assert group_metrics("1", "stark", [row("p", attempts)]).fast_layout_share == pytest.approx(2 / 3)
    assert group_metrics("1", "stark", [A, B, C]).fast_layout_share is None  # no CUDA extensions


def test_mean_fraction_of_sol_covers_solved_problems_with_a_floor() -> None:
    solved = [
        row("a", [attempt(1, "passed", 1.0, 2.0)]).model_copy(update={"sol_fraction": 0.6}),
        row("b", [attempt(1, "passed", 1.0, 2.0)]).model_copy(update={"sol_fraction": 0.2}),
        row("c", [attempt(1, "passed", 1.0, 2.0)]),  # no floor: left out
        row("d", [attempt(1, "wrong_output")]).model_copy(update={"reference_sol_fraction": 0.1}),
    ]
    assert group_metrics("1", "stark", solved).mean_sol_fraction == pytest.approx(0.4)
    assert group_metrics("1", "stark", solved[2:]).mean_sol_fraction is None
    # an algebraic rewrite at 40x its reference's floor counts as the speed of light, and is counted
    rewrite = row("e", [attempt(1, "passed", 1.0, 2.0)]).model_copy(update={"sol_fraction": 40.0})
    metrics = group_metrics("1", "stark", [*solved, rewrite])
    assert metrics.mean_sol_fraction == pytest.approx((0.6 + 0.2 + 1.0) / 3)
    assert metrics.beyond_sol == 1 and group_metrics("1", "stark", solved).beyond_sol == 0
