"""The one-line ``statusMessage`` of a finished task, as a person reads it in a host's task list.

E.g. ``n7 passed, 2.41x; 12/30 attempts`` for ``add_child`` or
``optimize r-7kq2mz: 6 attempts, best n9 1.83x; 12/30 attempts; $3.10`` for ``optimize``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from stark_mcp.orchestrator.tasks import TaskRecord

BudgetOf = Callable[[str], Awaitable[int]]
RecordedOf = Callable[[str], Awaitable[int]]


def _speedup(speedups: dict[str, Any] | None, sep: str = ", ") -> str:
    value = (speedups or {}).get("eager")
    return f"{sep}{value:.2f}x" if isinstance(value, int | float) else ""


def _used(budget: int | None, recorded: int | None, left: Any) -> str:
    """``12/30 attempts``: recorded out of the budget, and how many others are being evaluated
    (``attempts_left`` counts those as used)."""
    if budget is None or recorded is None or not isinstance(left, int):
        return f"{left} attempts left"
    in_flight = budget - left - recorded
    return f"{recorded}/{budget} attempts" + (f", {in_flight} in flight" if in_flight > 0 else "")


def _error_text(result: dict[str, Any]) -> str:
    texts = [block.get("text", "") for block in result.get("content", []) if isinstance(block, dict)]
    return " ".join(texts).strip()[:300]


def summarizer(budget_of: BudgetOf, recorded_of: RecordedOf) -> Callable[[TaskRecord], Awaitable[str]]:
    """``summarize(record)`` for ``TaskManager``; ``budget_of(run_id)`` reads a run's budget and
    ``recorded_of(run_id)`` its attempts recorded."""

    async def used(data: dict[str, Any]) -> str:
        run_id = data.get("run_id")
        if not run_id:
            return _used(None, None, data.get("attempts_left"))
        return _used(await budget_of(run_id), await recorded_of(run_id), data.get("attempts_left"))

    async def summarize(record: TaskRecord) -> str:
        result = record.result or {}
        data = result.get("structuredContent") or {}
        if result.get("isError"):
            return f"{record.tool} failed: {_error_text(result)}"
        if record.tool == "add_child":
            verdict = f"{data.get('node_id')} {data.get('status')}{_speedup(data.get('speedups'))}"
            return f"{verdict}; {await used(data)}"
        if record.tool == "evaluate_kernel":
            return f"evaluation {data.get('status')}{_speedup(data.get('speedups'))} (not recorded)"
        if record.tool == "optimize":
            spent = await used(data)
            best = data.get("best_node_id")
            best_text = f", best {best}{_speedup(data.get('best_speedups'), ' ')}" if best else ""
            return (
                f"optimize {data.get('run_id')}: {data.get('attempts')} attempts{best_text}; {spent}; "
                f"${float(data.get('cost_usd') or 0.0):.2f}"
            )
        if record.tool == "create_run":
            eager = (data.get("baselines_ms") or {}).get("eager")
            timed = f"; eager {eager:.4g} ms" if isinstance(eager, int | float) else ""
            return f"run {data.get('run_id')} created, budget {data.get('budget')}{timed}"
        return f"{record.tool} done"

    return summarize
