"""The tree resource's document: rows rendered once per node, the same JSON as rendering it whole."""

from __future__ import annotations

import json

from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Evaluation, Node, RunRecord, Status, TimingStats
from stark_mcp.server.resources import TreeRows, node_row, tree_document

from .support import PROBLEM


def nodes(count: int) -> list[Node]:
    ms = TimingStats(median_ms=1.0, iqr_ms=0.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, samples=3)
    speedups = {"eager": 2.0, "compile_default": float("inf")}
    passed = Evaluation(status=Status.PASSED, runtime=ms, speedups=speedups)
    made = [Node(id="n0", seq=0, action=Action.ROOT, source="ref", evaluation=passed)]
    for seq in range(1, count):
        failed = Evaluation(status=Status.BUILD_ERROR, reason="compile")
        made.append(Node(id=f"n{seq}", seq=seq, parent_id="n0", action=Action.PLAN, source=f"s{seq}",
                         evaluation=passed if seq % 2 else failed, adherence=0.5))
    return made


def test_rows_grow_with_the_tree_and_the_document_is_what_rendering_it_whole_gives() -> None:
    run = RunRecord(id="r-1", name="p", problem=problem_from_source(PROBLEM.read_text(), name="p"),
                    device="cpu", policy={"name": "stark"}, budget=9, seed=1, created_at=0, updated_at=0)
    rows = TreeRows()
    assert len(rows.rows(run.id, nodes(3))) == 3
    grown = nodes(5)
    document = json.loads(tree_document(run, rows.rows(run.id, grown)))
    assert document["nodes"] == [json.loads(json.dumps(node_row(n))) for n in grown]
    assert document["nodes"][0]["speedups"] == {"eager": 2.0}  # JSON has no infinity
    assert document["nodes"][2] == {"id": "n2", "parent": "n0", "action": "plan", "status": "build_error",
                                    "reason": "compile", "runtime_ms": None, "speedups": {}, "adherence": 0.5}
    assert (document["run_id"], document["budget"]) == ("r-1", 9)
    assert len(rows.rows(run.id, grown[:2])) == 2  # not a later version of the same run: rendered afresh
