"""The benchmark table of runs driven through MCP (or any runs in the store), by run id. Pure.

A host's model driving ``stark-mcp serve`` leaves runs, not a benchmark folder; this makes the same
rows (``bench/rows.py``) from their documents, so ``bench/metrics.py`` and ``report/tables.py``
compute and print the same figures a benchmark's report has, plus ``compile_best`` (each problem's
fastest torch.compile mode). ``wall_s`` of a run is its evaluator time (the attempts' evaluations):
the host's own thinking between calls is not the server's to know.
"""

from __future__ import annotations

from collections.abc import Sequence

from stark_mcp.bench.files import Manifest
from stark_mcp.bench.metrics import with_best_compile
from stark_mcp.bench.rows import ResultRow, result_row
from stark_mcp.orchestrator.documents import RunDocument
from stark_mcp.records import Action

RUNS_BENCH_ID = "mcp-runs"


def problem_key(document: RunDocument) -> str:
    problem = document.run.problem
    if problem.level is not None and problem.problem_id is not None:
        return f"{problem.level}/{problem.problem_id}"
    return problem.name


def evaluator_seconds(document: RunDocument) -> float:
    return sum(
        node.evaluation.wall_seconds or 0.0
        for node in document.nodes
        if node.action is not Action.ROOT and node.evaluation is not None
    )


def runs_rows(documents: Sequence[RunDocument]) -> list[ResultRow]:
    rows = []
    for document in documents:
        key = problem_key(document)
        row = result_row(
            bench_id=RUNS_BENCH_ID, pair=f"{key}:{document.run.strategy}", key=key, run=document.run,
            nodes=document.nodes, exchanges=document.exchanges, wall_s=evaluator_seconds(document),
        )
        rows.append(with_best_compile(row))
    return sorted(rows, key=lambda r: (r.level is None, r.level or 0, r.problem_id or 0, r.name, r.run_id))


def runs_manifest(documents: Sequence[RunDocument], rows: Sequence[ResultRow]) -> Manifest:
    return Manifest(
        bench_id=RUNS_BENCH_ID,
        created_at=min((d.run.created_at for d in documents), default=0.0),
        identity={"runs": [d.run.id for d in documents]},
        pairs=[r.pair for r in rows],
        command={"budget": max((d.run.budget for d in documents), default=0),
                 "runs": [d.run.id for d in documents]},
    )
