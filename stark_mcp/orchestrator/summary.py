"""A run's outcome read back from the store: totals, the best node, and the ``SearchSummary``.

Built from what is recorded, not from the loop's memory, so the CLI can summarize a run that
was interrupted, and a resumed run's totals include its earlier sessions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from stark_mcp.orchestrator.events import FailedExpansion, SearchSummary
from stark_mcp.orchestrator.limits import STOP_MESSAGES, StopReason
from stark_mcp.orchestrator.reads import RunReads
from stark_mcp.records import Node


def eager_speedup(node: Node | None) -> float | None:
    if node is None or node.evaluation is None or not node.evaluation.passed:
        return None
    value = node.evaluation.speedups.get("eager")
    return value if value is not None and math.isfinite(value) else None


async def summarize_run(
    service: RunReads,
    run_id: str,
    *,
    stop_reason: StopReason,
    new_attempts: int,
    wall_s: float,
    failed: Sequence[FailedExpansion] = (),
    message: str | None = None,
) -> SearchSummary:
    run = await service.get_run(run_id)
    best = await service.best(run_id)
    evaluation = best.evaluation if best is not None else None
    eager = run.baselines.get("eager")
    return SearchSummary(
        run_id=run_id,
        strategy=run.strategy,
        policy=str(run.policy.get("name", "")),
        status=run.status,
        stop_reason=stop_reason,
        message=message or STOP_MESSAGES[stop_reason],
        attempts=await service.attempts(run_id),
        new_attempts=new_attempts,
        budget=run.budget,
        failed_expansions=list(failed),
        best_node_id=best.id if best is not None else None,
        best_runtime_ms=evaluation.runtime.median_ms if evaluation and evaluation.runtime else None,
        eager_ms=eager.median_ms if eager is not None else None,
        speedups={k: v for k, v in (evaluation.speedups if evaluation else {}).items() if math.isfinite(v)},
        usage=await service.usage(run_id),
        wall_s=round(wall_s, 3),
    )
