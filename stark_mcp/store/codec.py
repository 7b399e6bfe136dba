"""Turning records into column values and rows back into records. Pure, no IO.

Nested records (problem, evaluation, usage, baselines) are stored as pydantic JSON so
their schema can grow without a migration; the columns SQL filters or sorts on
(status, score, hashes, timestamps) are stored beside them.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from pydantic import TypeAdapter

from stark_mcp.problems import Problem
from stark_mcp.records import (
    Action,
    Evaluation,
    ExchangeRecord,
    Node,
    RunRecord,
    StoredEvaluation,
    TimingStats,
    Usage,
)
from stark_mcp.store.errors import StoreError

_BASELINES = TypeAdapter(dict[str, TimingStats])


def to_json(value: Any, what: str) -> str:
    """Plain JSON for caller-given dicts; a value JSON cannot hold is the caller's error."""
    try:
        return json.dumps(value, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be JSON-serializable: {exc}") from None


def run_columns(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.name,
        "problem_json": run.problem.model_dump_json(),
        "problem_hash": run.problem.hash,
        "device": run.device,
        "strategy": run.strategy,
        "policy_json": to_json(run.policy, "policy"),
        "budget": run.budget,
        "seed": run.seed,
        "config_json": to_json(run.config, "config"),
        "baselines_json": _BASELINES.dump_json(run.baselines).decode(),
        "language": run.language,
        "pending_baselines_json": json.dumps(list(run.pending_baselines)),
        "status": run.status,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    }


def run_from_row(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        name=row["name"],
        problem=Problem.model_validate_json(row["problem_json"]),
        device=row["device"],
        strategy=row["strategy"],
        policy=json.loads(row["policy_json"]),
        budget=row["budget"],
        seed=row["seed"],
        config=json.loads(row["config_json"]),
        baselines=_BASELINES.validate_json(row["baselines_json"]),
        language=row["language"],
        pending_baselines=json.loads(row["pending_baselines_json"]),
        status=row["status"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def node_columns(node: Node) -> dict[str, Any]:
    evaluation = node.evaluation
    return {
        "run_id": node.run_id,
        "id": node.id,
        "seq": node.seq,
        "parent_id": node.parent_id,
        "action": node.action.value,
        "plan": node.plan,
        "source": node.source,
        "evaluation_json": evaluation.model_dump_json() if evaluation is not None else None,
        "status": evaluation.status.value if evaluation is not None else None,
        "score": node.score,
        "usage_json": node.usage.model_dump_json(),
        "adherence": node.adherence,
        "created_at": node.created_at,
    }


def node_from_row(row: sqlite3.Row) -> Node:
    evaluation_json = row["evaluation_json"]
    return Node(
        id=row["id"],
        run_id=row["run_id"],
        parent_id=row["parent_id"],
        seq=row["seq"],
        action=Action(row["action"]),
        plan=row["plan"],
        source=row["source"],
        evaluation=Evaluation.model_validate_json(evaluation_json) if evaluation_json else None,
        usage=Usage.model_validate_json(row["usage_json"]),
        adherence=row["adherence"],
        created_at=row["created_at"],
    )


def score_from_column(value: float | None) -> float:
    """The score column as a float; +inf round-trips as a REAL, NULL is read as +inf too."""
    return math.inf if value is None else float(value)


def evaluation_from_row(row: sqlite3.Row) -> StoredEvaluation:
    return StoredEvaluation(
        id=row["id"],
        run_id=row["run_id"],
        source_hash=row["source_hash"],
        evaluation=Evaluation.model_validate_json(row["evaluation_json"]),
        created_at=row["created_at"],
    )


def exchange_from_row(row: sqlite3.Row) -> ExchangeRecord:
    return ExchangeRecord(
        id=row["id"],
        run_id=row["run_id"],
        node_id=row["node_id"],
        role=row["role"],
        model=row["model"],
        request=json.loads(row["request_json"]),
        reply=row["reply"],
        usage=Usage.model_validate_json(row["usage_json"]),
        error=row["error"],
        created_at=row["created_at"],
    )
