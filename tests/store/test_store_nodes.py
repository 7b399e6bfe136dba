from __future__ import annotations

import asyncio
import math
import sqlite3

import pytest

from stark_mcp.problems import Problem
from stark_mcp.records import Action, Status, Usage
from stark_mcp.store import NotFound, RunRecord, Store, StoreError

from .helpers import PROBLEM_SOURCE, failed, passed

pytestmark = pytest.mark.anyio

PLAN = "Fuse tanh and scale.\n<<<IMPROVE BEGIN>>>\n        return torch.tanh(x) * 2.0\n<<<IMPROVE END>>>\n"


async def test_ids_follow_creation_order_from_n0(store: Store, run: RunRecord) -> None:
    root = await store.add_node(run.id, parent_id=None, action=Action.ROOT, source=PROBLEM_SOURCE)
    a = await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source="a", plan=PLAN)
    b = await store.add_node(run.id, parent_id=a.id, action=Action.DEBUG, source="b")
    c = await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source="c", plan=PLAN)
    assert [(n.id, n.seq) for n in (root, a, b, c)] == [("n0", 0), ("n1", 1), ("n2", 2), ("n3", 3)]
    assert [n.id for n in await store.nodes(run.id)] == ["n0", "n1", "n2", "n3"]
    assert [n.parent_id for n in await store.nodes(run.id)] == [None, "n0", "n1", "n0"]
    assert await store.count_nodes(run.id) == 3
    assert await store.count_nodes(run.id, exclude_root=False) == 4


async def test_node_round_trip_keeps_every_field(store: Store, root_run: RunRecord) -> None:
    usage = Usage(input_tokens=1200, output_tokens=800, cache_read_tokens=900, cost_usd=0.0123, calls=2)
    made = await store.add_node(
        root_run.id, parent_id="n0", action=Action.PLAN, source="fast source", plan=PLAN,
        evaluation=passed(0.5), usage=usage, adherence=0.75,
    )
    loaded = await store.get_node(root_run.id, made.id)
    assert loaded == made
    assert loaded.run_id == root_run.id
    assert loaded.evaluation == passed(0.5)
    assert loaded.score == 0.5
    assert loaded.usage == usage
    assert loaded.adherence == 0.75
    assert loaded.plan == PLAN
    assert loaded.created_at > 0


async def test_failed_and_unevaluated_nodes_score_infinity_and_sort_last_in_sql(
    store: Store, root_run: RunRecord
) -> None:
    await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source="x", evaluation=failed())
    await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source="y", evaluation=passed(3.0))
    await store.add_node(root_run.id, parent_id="n1", action=Action.DEBUG, source="z", evaluation=passed(1.0))
    nodes = {n.id: n for n in await store.nodes(root_run.id)}
    assert nodes["n0"].evaluation is None and nodes["n0"].score == math.inf
    assert nodes["n1"].status is Status.BUILD_ERROR and nodes["n1"].score == math.inf
    assert nodes["n1"].has_bug

    with sqlite3.connect(store.path) as raw:
        rows = raw.execute(
            "SELECT id, score FROM nodes WHERE run_id = ? ORDER BY score, seq", (root_run.id,)
        ).fetchall()
    assert rows == [("n3", 1.0), ("n2", 3.0), ("n0", math.inf), ("n1", math.inf)]

    stats = await store.run_stats(root_run.id)
    assert (stats.attempts, stats.passed, stats.best_node_id, stats.best_score) == (3, 2, "n3", 1.0)


async def test_run_stats_of_a_run_with_nothing_passed(store: Store, root_run: RunRecord) -> None:
    await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source="x", evaluation=failed())
    stats = await store.run_stats(root_run.id)
    assert (stats.attempts, stats.passed, stats.best_node_id, stats.best_score) == (1, 0, None, math.inf)


async def test_a_run_has_one_root(store: Store, root_run: RunRecord) -> None:
    with pytest.raises(StoreError, match="already has a root"):
        await store.add_node(root_run.id, parent_id=None, action=Action.ROOT, source="again")
    assert await store.count_nodes(root_run.id, exclude_root=False) == 1


async def test_parent_rules(store: Store, run: RunRecord, problem: Problem) -> None:
    with pytest.raises(NotFound, match=f"no node 'n0' in run '{run.id}'"):
        await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source="before the root")
    await store.add_node(run.id, parent_id=None, action=Action.ROOT, source=PROBLEM_SOURCE)
    with pytest.raises(StoreError, match="needs a parent"):
        await store.add_node(run.id, parent_id=None, action=Action.PLAN, source="orphan")
    with pytest.raises(StoreError, match="root node has no parent"):
        await store.add_node(run.id, parent_id="n0", action=Action.ROOT, source="second root")
    with pytest.raises(NotFound, match=f"no node 'n9' in run '{run.id}'"):
        await store.add_node(run.id, parent_id="n9", action=Action.DEBUG, source="no such parent")

    other = await store.create_run(problem=problem, device="cpu", policy={}, budget=1, seed=0)
    await store.add_node(other.id, parent_id=None, action=Action.ROOT, source=PROBLEM_SOURCE)
    await store.add_node(other.id, parent_id="n0", action=Action.PLAN, source="only in other")
    with pytest.raises(NotFound, match=f"no node 'n1' in run '{run.id}'"):
        await store.add_node(run.id, parent_id="n1", action=Action.PLAN, source="parent in another run")
    with pytest.raises(NotFound, match="no run 'r-000000'"):
        await store.add_node("r-000000", parent_id=None, action=Action.ROOT, source="x")
    # Refused writes consumed no sequence numbers.
    assert [n.id for n in await store.nodes(run.id)] == ["n0"]
    assert (await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source="ok")).id == "n1"


async def test_get_node_not_found_names_node_or_run(store: Store, root_run: RunRecord) -> None:
    with pytest.raises(NotFound, match=f"no node 'n5' in run '{root_run.id}'"):
        await store.get_node(root_run.id, "n5")
    with pytest.raises(NotFound, match="no run 'r-111111'"):
        await store.get_node("r-111111", "n0")


async def test_concurrent_coroutines_get_distinct_contiguous_seqs(store: Store, root_run: RunRecord) -> None:
    made = await asyncio.gather(*(
        store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source=f"s{i}") for i in range(30)
    ))
    assert sorted(n.seq for n in made) == list(range(1, 31))
    assert [n.seq for n in await store.nodes(root_run.id)] == list(range(31))


async def test_cancelled_writes_leave_the_store_usable(store: Store, root_run: RunRecord) -> None:
    # Cancel add_node at many different points; a write either lands whole or not at all,
    # and the shared connection is never left inside a transaction.
    finished = 0
    for i in range(60):
        try:
            await asyncio.wait_for(
                store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source=f"c{i}"),
                timeout=(i % 12) * 0.0002,
            )
            finished += 1
        except TimeoutError:
            pass
    after = await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source="after")
    nodes = await store.nodes(root_run.id)
    assert [n.seq for n in nodes] == list(range(len(nodes)))
    assert nodes[-1] == after
    assert len(nodes) - 2 >= finished  # cancelled ones may still have committed


async def test_a_profile_is_attached_without_touching_the_verdict(store: Store, root_run: RunRecord) -> None:
    from stark_mcp.records import KernelProfile, ProfileReport

    made = await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source="s",
                                evaluation=passed(0.5))
    kernel = KernelProfile(name="void k(float*)", short_name="k", time_us=80.0, share=1.0,
                           dram_throughput_pct=91.0)
    report = ProfileReport(source="ncu", device_name="GPU", seconds=9.5, total_time_us=80.0, kernels=[kernel])
    updated = await store.set_profile(root_run.id, made.id, report)
    loaded = await store.get_node(root_run.id, made.id)
    assert loaded == updated and loaded.evaluation is not None and loaded.evaluation.profile == report
    assert loaded.evaluation.model_copy(update={"profile": None}) == passed(0.5)
    assert [n.id for n in await store.nodes(root_run.id) if n.score == 0.5] == [made.id]  # score column kept
    with pytest.raises(NotFound):
        await store.set_profile(root_run.id, "n99", report)
    bare = await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source="t")
    with pytest.raises(StoreError, match="no evaluation"):
        await store.set_profile(root_run.id, bare.id, report)
