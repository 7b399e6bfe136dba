"""Late baselines rewrite nodes already written: in one transaction, with the run's revision
bumped so that readers holding a tree read it again, and whole even when the caller is cancelled."""

from __future__ import annotations

import asyncio

import pytest

from stark_mcp.problems import Problem
from stark_mcp.records import Action, Evaluation, RunRecord
from stark_mcp.store import Store

from .helpers import CancellingConnection, failed, passed, timing

pytestmark = pytest.mark.anyio


def add_compile(evaluation: Evaluation) -> Evaluation | None:
    if not evaluation.passed or "compile_default" in evaluation.speedups:
        return None
    assert evaluation.runtime is not None
    return evaluation.model_copy(
        update={
            "baselines": {**evaluation.baselines, "compile_default": timing(1.0)},
            "speedups": {**evaluation.speedups, "compile_default": 1.0 / evaluation.runtime.median_ms},
        }
    )


async def pending_run(store: Store, problem: Problem) -> RunRecord:
    run = await store.create_run(
        problem=problem,
        device="cuda",
        policy={"name": "stark"},
        budget=10,
        seed=1,
        baselines={"eager": timing(2.0)},
        root_evaluation=passed(2.0),
        language="triton",
        pending_baselines=["compile_default", "compile_max_autotune"],
    )
    await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source="a", evaluation=passed(0.5))
    await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source="b", evaluation=failed())
    await store.save_evaluation(run.id, "h", passed(0.25))
    return run


async def test_fill_rewrites_passed_nodes_and_evaluations_and_bumps_the_revision(
    store: Store, problem: Problem
) -> None:
    run = await pending_run(store, problem)
    assert run.language == "triton" and (await store.get_run(run.id)).pending_baselines == [
        "compile_default",
        "compile_max_autotune",
    ]
    revision, nodes = await store.nodes_since(run.id, -1, -1)
    assert [n.id for n in nodes] == ["n0", "n1", "n2"]
    assert await store.nodes_since(run.id, 2, revision) == (revision, [])

    updated = await store.fill_baselines(
        run.id,
        {"compile_default": timing(1.0)},
        add_compile,
        done=["compile_default", "compile_max_autotune"],
        errors={"compile_max_autotune": "no compiler"},
    )
    assert updated.pending_baselines == []
    assert set(updated.baselines) == {"eager", "compile_default"}
    stored = await store.get_run(run.id)
    assert stored.config["baseline_errors"] == {"compile_max_autotune": "no compiler"}
    assert stored.pending_baselines == [] and "compile_default" in stored.baselines

    new_revision, nodes = await store.nodes_since(run.id, 2, revision)  # a reader holding n0..n2
    assert new_revision == revision + 1 and [n.id for n in nodes] == ["n0", "n1", "n2"]
    speedups = {n.id: n.evaluation.speedups for n in nodes if n.evaluation}
    assert speedups["n1"] == pytest.approx({"eager": 4.0, "compile_default": 2.0})
    assert "compile_default" in speedups["n0"]
    assert nodes[2].evaluation is not None and not nodes[2].evaluation.speedups  # failed: left alone
    assert nodes[1].score == 0.5  # runtimes, hence scores, are untouched
    (evaluation,) = [e for e in [await store.get_evaluation(i) for i in await _evaluation_ids(store, run.id)]]
    assert evaluation.evaluation.speedups["compile_default"] == pytest.approx(4.0)


async def _evaluation_ids(store: Store, run_id: str) -> list[str]:
    async with store._conn.execute("SELECT id FROM evaluations WHERE run_id = ?", (run_id,)) as cur:
        return [row[0] for row in await cur.fetchall()]


async def test_a_fill_cancelled_at_any_statement_lands_whole(
    store: Store, problem: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = CancellingConnection(store._conn)
    monkeypatch.setattr(store, "_conn", connection)
    run = await pending_run(store, problem)
    connection.count = 0
    late = {"compile_default": timing(1.0)}
    await store.fill_baselines(run.id, late, add_compile, done=["compile_default"])
    statements = connection.count
    for at in range(1, statements + 1):
        run = await pending_run(store, problem)
        caller = asyncio.create_task(
            store.fill_baselines(run.id, late, add_compile, done=["compile_default"])
        )
        connection.arm(caller, at, "after")
        with pytest.raises(asyncio.CancelledError):
            await caller
        connection.victim = None
        nodes = await store.nodes(run.id)
        stored = await store.get_run(run.id)
        assert stored.pending_baselines == ["compile_max_autotune"], at
        assert all("compile_default" in n.evaluation.speedups for n in nodes if n.evaluation.passed), at
