from __future__ import annotations

import re
from pathlib import Path

import pytest

from stark_mcp.problems import Problem
from stark_mcp.records import Action, RunRecord, Status, Usage
from stark_mcp.store import NotFound, Store, StoreError

from .helpers import failed, passed

pytestmark = pytest.mark.anyio

EVALUATION_ID = re.compile(r"^e-[0-9abcdefghjkmnpqrstvwxyz]{8}$")


async def test_stored_evaluation_round_trips_after_reopening(
    db_path: Path, store: Store, run: RunRecord
) -> None:
    saved = await store.save_evaluation(run.id, "f00dfeed", passed(0.8))
    other = await store.save_evaluation(run.id, "f00dfeed", failed(Status.WRONG_OUTPUT))
    assert EVALUATION_ID.match(saved.id) and saved.id != other.id
    async with await Store.open(db_path) as again:
        loaded = await again.get_evaluation(saved.id)
    assert loaded == saved
    assert loaded.evaluation.score == 0.8
    assert (await store.get_evaluation(other.id)).evaluation.status is Status.WRONG_OUTPUT


async def test_evaluation_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="no evaluation 'e-00000000'"):
        await store.get_evaluation("e-00000000")
    with pytest.raises(NotFound, match="no run 'r-nothere'"):
        await store.save_evaluation("r-nothere", "abc", passed(1.0))


async def test_exchanges_are_logged_then_attached_to_their_node(store: Store, root_run: RunRecord) -> None:
    run_id = root_run.id
    usage = Usage(input_tokens=5000, output_tokens=700, cache_read_tokens=4000, cost_usd=0.02, calls=1)
    plan = await store.log_exchange(
        run_id=run_id, node_id=None, role="plan", model="claude-x",
        request={"system": "You plan.", "prefix": "tree context", "body": "improve n0"},
        reply="<<<IMPROVE BEGIN>>> ...", usage=usage,
    )
    code = await store.log_exchange(
        run_id=run_id, node_id=None, role="code", model="claude-x",
        request={"system": "You code.", "body": "realize the plan", "temperature": 0.1},
        reply="", usage=Usage(), error="overloaded (529)",
    )
    assert code.id > plan.id
    assert await store.exchanges(run_id, "n0") == []

    node = await store.add_node(run_id, parent_id="n0", action=Action.PLAN, source="src", usage=usage)
    await store.attach_exchanges(run_id, [plan.id, code.id], node.id)

    attached = await store.exchanges(run_id, node.id)
    assert [e.id for e in attached] == [plan.id, code.id]
    assert attached[0] == plan.model_copy(update={"node_id": node.id})
    assert attached[1].error == "overloaded (529)"
    assert attached[1].request["temperature"] == 0.1
    assert [e.id for e in await store.exchanges(run_id)] == [plan.id, code.id]


async def test_exchange_logged_with_its_node(store: Store, root_run: RunRecord) -> None:
    logged = await store.log_exchange(
        run_id=root_run.id, node_id="n0", role="debug", model="m", request={"body": "fix"},
        reply="fixed", usage=Usage(calls=1),
    )
    assert await store.exchanges(root_run.id, "n0") == [logged]


async def test_attach_is_all_or_nothing(store: Store, root_run: RunRecord, problem: Problem) -> None:
    run_id = root_run.id
    mine = await store.log_exchange(
        run_id=run_id, node_id=None, role="plan", model="m", request={}, reply="r", usage=Usage()
    )
    other_run = await store.create_run(problem=problem, device="cpu", policy={}, budget=1, seed=0)
    theirs = await store.log_exchange(
        run_id=other_run.id, node_id=None, role="plan", model="m", request={}, reply="r", usage=Usage()
    )
    await store.add_node(run_id, parent_id="n0", action=Action.PLAN, source="s")

    with pytest.raises(NotFound, match=f"no exchange {theirs.id} in run '{run_id}'"):
        await store.attach_exchanges(run_id, [mine.id, theirs.id], "n1")
    with pytest.raises(NotFound, match=f"no exchange 999 in run '{run_id}'"):
        await store.attach_exchanges(run_id, [mine.id, 999], "n1")
    with pytest.raises(NotFound, match=f"no node 'n7' in run '{run_id}'"):
        await store.attach_exchanges(run_id, [mine.id], "n7")
    assert await store.exchanges(run_id, "n1") == []
    assert (await store.exchanges(run_id))[0].node_id is None


async def test_an_attached_exchange_stays_with_its_node(store: Store, root_run: RunRecord) -> None:
    run_id = root_run.id
    logged = await store.log_exchange(
        run_id=run_id, node_id=None, role="code", model="m", request={}, reply="r", usage=Usage()
    )
    await store.add_node(run_id, parent_id="n0", action=Action.PLAN, source="a")
    await store.add_node(run_id, parent_id="n0", action=Action.PLAN, source="b")
    await store.attach_exchanges(run_id, [logged.id], "n1")
    await store.attach_exchanges(run_id, [logged.id, logged.id], "n1")  # again, same node: no-op
    with pytest.raises(StoreError, match=f"exchange {logged.id} already belongs to node 'n1'"):
        await store.attach_exchanges(run_id, [logged.id], "n2")
    assert [e.id for e in await store.exchanges(run_id, "n1")] == [logged.id]
    assert await store.exchanges(run_id, "n2") == []
    await store.attach_exchanges(run_id, [], "n2")  # nothing to do


async def test_exchange_errors(store: Store, root_run: RunRecord) -> None:
    with pytest.raises(NotFound, match="no run 'r-nothere'"):
        await store.log_exchange(
            run_id="r-nothere", node_id=None, role="plan", model="m", request={}, reply="", usage=Usage()
        )
    with pytest.raises(NotFound, match=f"no node 'n4' in run '{root_run.id}'"):
        await store.log_exchange(
            run_id=root_run.id, node_id="n4", role="plan", model="m", request={}, reply="", usage=Usage()
        )
    with pytest.raises(StoreError, match="exchange request must be JSON-serializable"):
        await store.log_exchange(
            run_id=root_run.id, node_id=None, role="plan", model="m", request={"x": object()},
            reply="", usage=Usage(),
        )
    with pytest.raises(NotFound, match=f"no node 'n4' in run '{root_run.id}'"):
        await store.exchanges(root_run.id, "n4")
    assert await store.exchanges(root_run.id) == []
