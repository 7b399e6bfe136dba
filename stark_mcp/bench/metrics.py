"""The benchmark's numbers, per level and strategy, from ``results.jsonl`` rows. Pure.

Definitions (docs/bench.md explains them for readers):
- a problem is *solved* when its run holds a correct attempt; its best kernel is the fastest
  correct attempt, and its speedup vs a baseline is that attempt's recorded speedup;
- ``fast_p``: the share of problems solved with a speedup strictly above p;
- ``geomean_speedup`` and ``mean_speedup``: over all problems, an unsolved problem counting as
  1x (the user keeps the reference); ``*_correct``: over solved problems only;
- a problem without a baseline (that mode failed to time) is left out of that baseline's figures,
  and ``baseline_problems`` says how many problems each baseline's figures cover;
- ``compile_rate`` and ``correct_rate``: over all attempts; an attempt compiled when its verdict is
  neither ``build_error`` nor ``load_error``;
- ``mean_sol_fraction``: over solved problems with a floor, the mean of the best attempt's floor /
  time (docs/sol.md), each capped at 1.0 (the speed of light): above 1 the computation was changed
  (an algebraic rewrite, flagged ``beyond_reference_roofline``), which is no nearer the machine's
  limit, and one such problem at 40x would otherwise outweigh every other; ``beyond_sol`` counts them;
- ``success_rate_allclose``: the share of problems with an attempt whose outputs KernelBench's
  ``allclose(atol=rtol=1e-2)`` accepts; ``rejected_allclose_ok``: attempts we failed that it accepts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from stark_mcp.bench.rows import AttemptRow, ResultRow

P_VALUES: tuple[str, ...] = ("1", "1.5", "2")
NOT_COMPILED = frozenset({"build_error", "load_error"})
ALL_LEVELS = "all"
NO_LEVEL = "custom"


class GroupMetrics(BaseModel):
    level: str
    strategy: str
    problems: int
    complete: int = Field(description="problems whose run holds its whole budget")
    solved: int
    success_rate: float
    success_rate_allclose: float
    rejected_allclose_ok: int
    baseline_problems: dict[str, int]
    fast_p: dict[str, dict[str, float | None]]
    geomean_speedup: dict[str, float | None]
    mean_speedup: dict[str, float | None]
    geomean_speedup_correct: dict[str, float | None]
    mean_speedup_correct: dict[str, float | None]
    attempts: int
    compile_rate: float | None
    correct_rate: float | None
    fast_layout_share: float | None = Field(
        None, description="attempts with CUDA extensions: the share built in the fast layout"
    )
    attempts_to_first_correct: float | None = Field(description="mean over solved problems")
    attempts_to_first_correct_median: float | None
    tokens: float = Field(description="input + output tokens per problem (mean)")
    cost_usd: float = Field(description="LLM cost per problem (mean)")
    total_cost_usd: float
    wall_s: float = Field(description="wall time per problem (mean)")
    total_wall_s: float
    mean_sol_fraction: float | None = Field(
        None,
        description="solved problems with a floor: mean of the best attempt's floor / time, each capped at 1",
    )
    beyond_sol: int = Field(
        0, description="solved problems whose best attempt is beyond the reference's roofline"
    )


BEST_COMPILE = "compile_best"


def with_best_compile(row: ResultRow) -> ResultRow:
    """The row with one more baseline, ``compile_best``: per problem, the fastest of its timed
    torch.compile modes, and the best kernel's speedup over it (the smallest of its compile
    speedups). Rows without a compile baseline are returned unchanged."""
    modes = {k: v for k, v in row.baselines_ms.items() if k.startswith("compile_") and k != BEST_COMPILE}
    if not modes:
        return row
    fastest = min(modes, key=lambda name: modes[name])
    speedups = dict(row.speedups)
    over = [row.speedups[name] for name in modes if name in row.speedups]
    if row.solved and len(over) == len(modes):
        speedups[BEST_COMPILE] = min(over)
    return row.model_copy(update={
        "baselines_ms": {**row.baselines_ms, BEST_COMPILE: modes[fastest]}, "speedups": speedups,
    })


def level_label(level: int | None) -> str:
    return NO_LEVEL if level is None else str(level)


def baseline_mode(name: str) -> str:
    """How a baseline name's figure was timed, by the evaluator's naming rule ``compile_<mode>``."""
    if name == "eager":
        return "eager PyTorch"
    if name == BEST_COMPILE:
        return "torch.compile, each problem's fastest mode"
    if name.startswith("compile_"):
        return f'torch.compile(mode="{name.removeprefix("compile_").replace("_", "-")}")'
    return name


def row_speedup(row: ResultRow, baseline: str) -> float | None:
    """The problem's figure vs ``baseline``: the best kernel's speedup, 1.0 if unsolved, None if the
    run has no such baseline (then the problem is left out of that baseline's figures)."""
    if baseline not in row.baselines_ms:
        return None
    if not row.solved:
        return 1.0
    return row.speedups.get(baseline)


def geomean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def first_correct(attempts: Sequence[AttemptRow]) -> int | None:
    """1-based position of the first passing attempt in creation order."""
    return next((i for i, a in enumerate(attempts, start=1) if a.status == "passed"), None)


def baselines_of(rows: Iterable[ResultRow]) -> list[str]:
    """Every baseline name in the rows, eager first, then in first-seen order."""
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row.baselines_ms))
    return sorted(names, key=lambda n: (n != "eager", list(names).index(n)))


def group_metrics(level: str, strategy: str, rows: Sequence[ResultRow]) -> GroupMetrics:
    n = len(rows)
    attempts = [a for row in rows for a in row.attempts]
    solved = [r for r in rows if r.solved]
    baseline_problems: dict[str, int] = {}
    fast_p: dict[str, dict[str, float | None]] = {}
    geo: dict[str, float | None] = {}
    avg: dict[str, float | None] = {}
    geo_ok: dict[str, float | None] = {}
    avg_ok: dict[str, float | None] = {}
    for name in baselines_of(rows):
        figures = [(r, s) for r in rows if (s := row_speedup(r, name)) is not None]
        values = [s for _, s in figures]
        correct = [s for r, s in figures if r.solved]
        baseline_problems[name] = len(figures)
        fast_p[name] = {
            p: (sum(1 for r, s in figures if r.solved and s > float(p)) / len(figures) if figures else None)
            for p in P_VALUES
        }
        geo[name], avg[name] = geomean(values), mean(values)
        geo_ok[name], avg_ok[name] = geomean(correct), mean(correct)
    firsts = [f for r in rows if (f := first_correct(r.attempts)) is not None]
    total_cost = sum(r.usage.cost_usd for r in rows)
    total_wall = sum(r.wall_s for r in rows)
    return GroupMetrics(
        level=level,
        strategy=strategy,
        problems=n,
        complete=sum(r.complete for r in rows),
        solved=len(solved),
        success_rate=len(solved) / n if n else 0.0,
        success_rate_allclose=(sum(any(a.allclose_1e2 for a in r.attempts) for r in rows) / n if n else 0.0),
        rejected_allclose_ok=sum(1 for a in attempts if a.status != "passed" and a.allclose_1e2),
        baseline_problems=baseline_problems,
        fast_p=fast_p,
        geomean_speedup=geo,
        mean_speedup=avg,
        geomean_speedup_correct=geo_ok,
        mean_speedup_correct=avg_ok,
        attempts=len(attempts),
        compile_rate=(sum(a.status not in NOT_COMPILED for a in attempts) / len(attempts))
        if attempts
        else None,
        correct_rate=(sum(a.status == "passed" for a in attempts) / len(attempts)) if attempts else None,
        fast_layout_share=_share(a.layout == "fast" for a in attempts if a.layout is not None),
        attempts_to_first_correct=mean(firsts),
        attempts_to_first_correct_median=float(statistics.median(firsts)) if firsts else None,
        tokens=(sum(r.usage.input_tokens + r.usage.output_tokens for r in rows) / n) if n else 0.0,
        cost_usd=total_cost / n if n else 0.0,
        total_cost_usd=total_cost,
        wall_s=total_wall / n if n else 0.0,
        total_wall_s=total_wall,
        mean_sol_fraction=mean([min(r.sol_fraction, 1.0) for r in solved if r.sol_fraction is not None]),
        beyond_sol=sum(1 for r in solved if r.sol_fraction is not None and r.sol_fraction > 1.0),
    )


def _share(flags: Iterable[bool]) -> float | None:
    values = list(flags)
    return sum(values) / len(values) if values else None


def strategies_of(rows: Iterable[ResultRow]) -> list[str]:
    return list(dict.fromkeys(r.strategy for r in rows))


def levels_of(rows: Iterable[ResultRow]) -> list[str]:
    levels = {r.level for r in rows}
    return [str(v) for v in sorted(v for v in levels if v is not None)] + (
        [NO_LEVEL] if None in levels else []
    )


def all_metrics(rows: Sequence[ResultRow]) -> dict[str, dict[str, GroupMetrics]]:
    """``{level: {strategy: metrics}}`` for each level present, plus ``all`` over every level."""
    out: dict[str, dict[str, GroupMetrics]] = {}
    strategies = strategies_of(rows)
    for level in [*levels_of(rows), ALL_LEVELS]:
        chosen = [r for r in rows if level == ALL_LEVELS or level_label(r.level) == level]
        out[level] = {
            s: group_metrics(level, s, picked)
            for s in strategies
            if (picked := [r for r in chosen if r.strategy == s])
        }
    return out


def best_so_far(row: ResultRow, baseline: str, length: int) -> list[float]:
    """The problem's figure vs ``baseline`` after each of the first ``length`` attempts: the fastest
    correct attempt so far (1.0 before any); a run with fewer attempts carries its last value."""
    values: list[float] = []
    best_runtime = math.inf
    current = 1.0
    for attempt in row.attempts[:length]:
        if (
            attempt.runtime_ms is not None
            and attempt.runtime_ms < best_runtime
            and baseline in attempt.speedups
        ):
            best_runtime, current = attempt.runtime_ms, attempt.speedups[baseline]
        values.append(current)
    return values + [current] * (length - len(values))


def best_so_far_curve(rows: Sequence[ResultRow], baseline: str) -> list[float]:
    """Geometric mean over problems (that have ``baseline``) of ``best_so_far``, for attempts 1..max."""
    picked = [r for r in rows if baseline in r.baselines_ms]
    length = max((max(r.budget, len(r.attempts)) for r in picked), default=0)
    curves = [best_so_far(r, baseline, length) for r in picked]
    return [geomean([c[t] for c in curves]) or 1.0 for t in range(length)]
