"""The rows of ``results.jsonl``: one per (problem, strategy), with every attempt in brief.

Built from what a run recorded (pure: the caller reads the store), so the metrics can be
recomputed from the file alone and a resumed benchmark reports its earlier sessions too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from stark_mcp.records import Action, ExchangeRecord, Node, RunRecord, Usage
from stark_mcp.tree import Tree, leaderboard


class AttemptRow(BaseModel):
    """One attempt (a non-root node) in creation order."""

    node_id: str
    parent_id: str | None
    action: str
    status: str
    reason: str | None = None
    runtime_ms: float | None = Field(None, description="median runtime, passed attempts only")
    speedups: dict[str, float] = Field(default_factory=dict, description="passed attempts only, finite")
    allclose_1e2: bool | None = Field(None, description="KernelBench's verdict on the same outputs")
    layout: str | None = Field(
        None, description="its CUDA extensions' layout: fast (no torch headers in the .cu) or torch_headers"
    )


class ResultRow(BaseModel):
    """One (problem, strategy) pair of a benchmark and the run that holds it."""

    bench_id: str
    pair: str = Field(description="KEY:STRATEGY")
    key: str = Field(description="LEVEL/ID, or the problem's name when it has no level")
    name: str
    level: int | None
    problem_id: int | None
    strategy: str
    run_id: str
    device: str
    device_name: str = ""
    status: str = Field(description="the run's status")
    complete: bool = Field(description="the run holds its whole budget of attempts")
    budget: int
    attempts: list[AttemptRow] = Field(default_factory=list)
    baselines_ms: dict[str, float] = Field(default_factory=dict, description="baseline medians of the run")
    best_node_id: str | None = Field(None, description="the fastest distinct correct attempt")
    best_runtime_ms: float | None = None
    speedups: dict[str, float] = Field(default_factory=dict, description="the best attempt's, by baseline")
    usage: Usage = Field(default_factory=Usage, description="every LLM call, failed expansions included")
    failed_expansions: int = Field(0, description="LLM calls whose expansion recorded no attempt")
    wall_s: float = Field(0.0, description="seconds the benchmark spent on this pair, all sessions")
    model: str | None = None
    language: str | None = None
    sol_floor_ms: float | None = Field(None, description="the problem's floor on the machine (docs/sol.md)")
    sol_fraction: float | None = Field(None, description="the best attempt's floor / time")
    reference_sol_fraction: float | None = Field(None, description="eager PyTorch's floor / time")

    @property
    def solved(self) -> bool:
        return self.best_node_id is not None


def result_row(
    *,
    bench_id: str,
    pair: str,
    key: str,
    run: RunRecord,
    nodes: Sequence[Node],
    exchanges: Sequence[ExchangeRecord],
    wall_s: float,
) -> ResultRow:
    attempts = [attempt_row(n) for n in nodes if n.action is not Action.ROOT]
    top = leaderboard(Tree(list(nodes)), 1) if nodes else []
    best = top[0] if top else None
    usage = Usage()
    for exchange in exchanges:
        usage = usage + exchange.usage
    device_name = next(
        (n.evaluation.device_name for n in nodes if n.evaluation and n.evaluation.device_name), ""
    )
    models = sorted({e.model for e in exchanges})
    best_sol = best.evaluation.sol if best and best.evaluation else None
    root_sol = next((n.evaluation.sol for n in nodes if n.action is Action.ROOT and n.evaluation), None)
    return ResultRow(
        bench_id=bench_id,
        pair=pair,
        key=key,
        name=run.problem.name,
        level=run.problem.level,
        problem_id=run.problem.problem_id,
        strategy=run.strategy,
        run_id=run.id,
        device=run.device,
        device_name=device_name,
        status=run.status,
        complete=len(attempts) >= run.budget,
        budget=run.budget,
        attempts=attempts,
        baselines_ms={k: v.median_ms for k, v in run.baselines.items()},
        best_node_id=best.id if best else None,
        best_runtime_ms=best.score if best else None,
        speedups=_finite(best.evaluation.speedups) if best and best.evaluation else {},
        usage=usage,
        failed_expansions=sum(1 for e in exchanges if e.node_id is None),
        wall_s=round(wall_s, 3),
        model=", ".join(models) or None,
        language=run.language,
        sol_floor_ms=(best_sol or root_sol).floor_ms if (best_sol or root_sol) else None,
        sol_fraction=best_sol.fraction if best_sol else None,
        reference_sol_fraction=root_sol.fraction if root_sol else None,
    )


def attempt_row(node: Node) -> AttemptRow:
    evaluation = node.evaluation
    passed = evaluation is not None and evaluation.passed and evaluation.runtime is not None
    correctness = evaluation.correctness if evaluation is not None else None
    return AttemptRow(
        node_id=node.id,
        parent_id=node.parent_id,
        action=node.action.value,
        status=evaluation.status.value if evaluation else "not_evaluated",
        reason=evaluation.reason if evaluation else None,
        runtime_ms=evaluation.runtime.median_ms if passed and evaluation and evaluation.runtime else None,
        speedups=_finite(evaluation.speedups) if passed and evaluation else {},
        allclose_1e2=correctness.allclose_1e2 if correctness is not None else None,
        layout=cuda_layout(evaluation.extensions) if evaluation else None,
    )


def cuda_layout(extensions: list[dict[str, Any]]) -> str | None:
    """``fast`` when every CUDA extension the attempt built is in the fast layout, ``torch_headers``
    when one is not, None without CUDA extensions (torch only, C++ only, or not built)."""
    layouts = {str(e.get("layout")) for e in extensions} - {"cpp"}
    if not layouts:
        return None
    return "fast" if layouts == {"fast"} else "torch_headers"


def _finite(values: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in values.items() if math.isfinite(v)}
