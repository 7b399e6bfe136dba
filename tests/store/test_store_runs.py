from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from stark_mcp.problems import Problem
from stark_mcp.records import Action, Evaluation, RunRecord, Status, TimingStats
from stark_mcp.store import NotFound, Store, StoreError

from .helpers import timing

pytestmark = pytest.mark.anyio

RUN_ID = re.compile(r"^r-[0-9abcdefghjkmnpqrstvwxyz]{6}$")


async def test_run_round_trips_through_a_reopened_file(db_path: Path, problem: Problem) -> None:
    async with await Store.open(db_path) as store:
        created = await store.create_run(
            problem=problem, device="cuda", strategy="sampling", policy={"name": "eps_greedy", "eps": 0.4},
            budget=30, seed=11, name="my tanh", config={"roles": {"plan": {"temperature": 0.8}}},
        )
    async with await Store.open(db_path) as store:
        loaded = await store.get_run(created.id)
    assert loaded == created
    assert RUN_ID.match(loaded.id)
    assert loaded.name == "my tanh"
    assert loaded.problem.hash == problem.hash
    assert loaded.problem.level == 1 and loaded.problem.problem_id == 7
    assert loaded.status == "created"
    assert loaded.created_at == loaded.updated_at > 0


async def test_name_defaults_to_the_problem_name(store: Store, problem: Problem) -> None:
    run = await store.create_run(problem=problem, device="auto", policy={}, budget=1, seed=0)
    assert run.name == "tanh_double"
    assert run.strategy == "stark"
    assert run.config == {}


async def test_list_runs_is_newest_first(store: Store, problem: Problem) -> None:
    ids = [
        (await store.create_run(problem=problem, device="cpu", policy={}, budget=1, seed=s)).id
        for s in range(4)
    ]
    assert [r.id for r in await store.list_runs()] == ids[::-1]


async def test_update_run_sets_fields_and_persists(store: Store, run: RunRecord) -> None:
    baselines = {"eager": timing(2.0), "compile_default": timing(1.5)}
    updated = await store.update_run(run.id, status="running", baselines=baselines)
    assert updated.status == "running"
    assert updated.baselines == baselines
    assert updated.config == run.config
    assert updated.updated_at >= run.updated_at

    updated = await store.update_run(run.id, config={"limit": 3})
    assert updated.status == "running"  # untouched fields keep their value
    assert (await store.get_run(run.id)) == updated
    assert updated.config == {"limit": 3}
    assert updated.baselines == baselines


async def test_update_run_refuses_an_unknown_status_and_changes_nothing(store: Store, run: RunRecord) -> None:
    with pytest.raises(StoreError, match="invalid update"):
        await store.update_run(run.id, status="exploded")  # type: ignore[arg-type]
    assert (await store.get_run(run.id)) == run


async def test_missing_runs_raise_not_found_naming_the_id(store: Store) -> None:
    with pytest.raises(NotFound, match="no run 'r-zzzzzz'"):
        await store.get_run("r-zzzzzz")
    with pytest.raises(NotFound, match="no run 'r-zzzzzz'"):
        await store.update_run("r-zzzzzz", status="finished")
    with pytest.raises(NotFound, match="no run 'r-zzzzzz'"):
        await store.nodes("r-zzzzzz")
    with pytest.raises(NotFound, match="no run 'r-zzzzzz'"):
        await store.count_nodes("r-zzzzzz")


async def test_close_is_idempotent_and_data_survives(db_path: Path, problem: Problem) -> None:
    store = await Store.open(db_path)
    run = await store.create_run(problem=problem, device="cpu", policy={}, budget=1, seed=0)
    await store.close()
    await store.close()
    async with await Store.open(db_path) as again:
        assert await again.get_run(run.id) == run


async def test_colliding_run_ids_are_redrawn(db_path: Path, problem: Problem) -> None:
    # Two stores with the same seeded generator draw the same first id; the second must notice.
    async with await Store.open(db_path, id_rng=random.Random(5)) as first:
        a = await first.create_run(problem=problem, device="cpu", policy={}, budget=1, seed=0)
    async with await Store.open(db_path, id_rng=random.Random(5)) as second:
        b = await second.create_run(problem=problem, device="cpu", policy={}, budget=1, seed=0)
        assert a.id != b.id
        assert RUN_ID.match(b.id)
        assert {r.id for r in await second.list_runs()} == {a.id, b.id}


async def test_create_run_with_root_commits_run_baselines_and_root_together(
    db_path: Path, problem: Problem
) -> None:
    stats = TimingStats(median_ms=2.0, iqr_ms=0.1, mean_ms=2.0, min_ms=1.9, max_ms=2.2, samples=30)
    root_eval = Evaluation(status=Status.PASSED, runtime=stats, baselines={"eager": stats})
    async with await Store.open(db_path) as store:
        run = await store.create_run(
            problem=problem, device="cpu", policy={"name": "stark"}, budget=3, seed=1,
            baselines={"eager": stats}, root_evaluation=root_eval,
        )
    async with await Store.open(db_path) as store:
        again = await store.get_run(run.id)
        nodes = await store.nodes(run.id)
    assert again.baselines["eager"] == stats
    assert [(n.id, n.action, n.parent_id, n.source) for n in nodes] == [("n0", Action.ROOT, None,
        problem.source)]
    assert nodes[0].score == 2.0
