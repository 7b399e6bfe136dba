from __future__ import annotations

import asyncio
import math
import sqlite3

import pytest

from stark_mcp.problems import Problem
from stark_mcp.records import Action, RunRecord, Status, Usage
from stark_mcp.store import NotFound, Store, StoreError

from .helpers import PROBLEM_SOURCE, CancellingConnection, failed, passed

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


async def test_a_write_cancelled_at_any_statement_lands_whole_and_leaves_the_store_usable(
    store: Store, root_run: RunRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cancel the caller of add_node right before and right after each statement it sends (BEGIN,
    # the checks, the INSERT, COMMIT): the connection is never left inside a transaction, and the
    # write, once it holds the lock, commits whole whatever happens to its caller.
    connection = CancellingConnection(store._conn)
    monkeypatch.setattr(store, "_conn", connection)
    await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source="counted")
    statements = connection.count
    assert statements >= 5
    cancelled: list[str] = []
    for at in range(1, statements + 1):
        for moment in ("before", "after"):
            label = f"cancelled {moment} statement {at}"
            caller = asyncio.create_task(
                store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source=label, plan=PLAN)
            )
            connection.arm(caller, at, moment)
            with pytest.raises(asyncio.CancelledError):
                await caller
            connection.victim = None
            cancelled.append(label)
            after = await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN,
                source=f"after {label}")
            nodes = await store.nodes(root_run.id)
            assert [n.seq for n in nodes] == list(range(len(nodes)))
            assert nodes[-1] == after
            assert all(n.plan == PLAN for n in nodes if n.source == label), label  # whole, if there
    # It held the lock before its first statement, so every cancelled write committed.
    assert [n.source for n in await store.nodes(root_run.id) if n.source in cancelled] == cancelled


async def test_profiles_are_kept_beside_nodes_that_never_change(store: Store, root_run: RunRecord) -> None:
    from stark_mcp.records import KernelProfile, ProfileReport

    made = await store.add_node(
        root_run.id, parent_id="n0", action=Action.PLAN, source="s", evaluation=passed(0.5)
    )
    kernel = KernelProfile(
        name="void k(float*)", short_name="k", time_us=80.0, share=1.0, dram_throughput_pct=91.0
    )
    report = ProfileReport(source="ncu", device_name="GPU", seconds=9.5, total_time_us=80.0, kernels=[kernel])
    first = await store.add_profile(root_run.id, made.id, report)
    second = await store.add_profile(root_run.id, made.id, ProfileReport(source="none", reason="ncu denied"))
    assert second > first
    assert [(seq, node_id, p.source) for seq, node_id, p in await store.profiles(root_run.id)] == [
        (first, made.id, "ncu"),
        (second, made.id, "none"),
    ]
    assert [p.source for _, _, p in await store.profiles(root_run.id, after_seq=first)] == ["none"]
    assert await store.get_node(root_run.id, made.id) == made  # the node row is untouched
    with pytest.raises(NotFound):
        await store.add_profile(root_run.id, "n99", report)
    bare = await store.add_node(root_run.id, parent_id="n0", action=Action.PLAN, source="t")
    with pytest.raises(StoreError, match="no evaluation"):
        await store.add_profile(root_run.id, bare.id, report)
