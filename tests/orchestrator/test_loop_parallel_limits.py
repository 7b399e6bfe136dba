"""K expansions in flight, the user's limits, and continuing a stopped run in the same process."""

from __future__ import annotations

import pytest

from stark_mcp.llm import ScriptedBackend
from stark_mcp.orchestrator.events import SearchEvent
from stark_mcp.orchestrator.limits import Limits
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.problems import problem_from_source

from .replies import CLAMPED, FUSED, PRICED, PROBLEM, WHERE, WRONG, code_reply

pytestmark = pytest.mark.anyio


async def _run(service: RunService, strategy: str, policy: str, budget: int) -> str:
    run, _ = await service.create_run(
        problem_from_source(PROBLEM, name="scaled_relu"), device="cpu", budget=budget, seed=3,
        policy=policy, strategy=strategy,
    )
    return run.id


async def test_two_workers_keep_two_expansions_in_flight_until_the_budget(service: RunService) -> None:
    run_id = await _run(service, "search_only", "stark", 4)
    backend = ScriptedBackend([code_reply(s) for s in (FUSED, WRONG, CLAMPED, WHERE)], prices=PRICED)
    events: list[SearchEvent] = []

    async def collect(event: SearchEvent) -> None:
        events.append(event)

    summary = await run_search(service, run_id, backend, parallel=2, progress=collect)

    assert summary.stop_reason == "budget" and summary.attempts == 4 and summary.status == "finished"
    nodes = (await service.store.nodes(run_id))[1:]
    assert [n.id for n in nodes] == ["n1", "n2", "n3", "n4"]
    assert sorted(n.source for n in nodes) == sorted((FUSED, WRONG, CLAMPED, WHERE))
    for node in nodes:
        assert len(await service.store.exchanges(run_id, node.id)) == 1
    kinds = [e.kind for e in events]
    # The second worker selects (and calls the model) before the first attempt is evaluated.
    assert kinds.index("selected", kinds.index("selected") + 1) < kinds.index("evaluated")
    assert sorted(e.step for e in events if e.kind == "selected") == [0, 1, 2, 3]


async def test_limits_stop_the_run_and_a_later_call_continues_it(service: RunService) -> None:
    run_id = await _run(service, "sampling", "sampling", 3)
    replies = [code_reply(s) for s in (CLAMPED, WHERE, FUSED)]

    backend = ScriptedBackend(replies, prices=PRICED)
    stopped = await run_search(service, run_id, backend, limits=Limits(max_wall_s=1e-9))
    assert stopped.stop_reason == "max_wall" and stopped.new_attempts == 0 and not backend.requests

    # One call costs about a cent with the scripted prices: a tenth of a cent stops after one attempt.
    stopped = await run_search(service, run_id, backend, limits=Limits(max_cost_usd=0.001))
    assert stopped.stop_reason == "max_cost" and stopped.attempts == 1 and stopped.status == "interrupted"
    assert stopped.usage.cost_usd > 0.001

    # The cost limit counts the whole run, so the same limit refuses to go on ...
    again = await run_search(service, run_id, backend, limits=Limits(max_cost_usd=0.001))
    assert again.stop_reason == "max_cost" and again.new_attempts == 0

    # ... while a call budget of one makes exactly one more attempt, and no limit finishes the run.
    one = await run_search(service, run_id, backend, budget=1)
    assert one.stop_reason == "budget" and one.attempts == 2 and one.status == "interrupted"
    done = await run_search(service, run_id, backend)
    assert done.attempts == 3 and done.new_attempts == 1 and done.status == "finished"
    assert [n.source for n in (await service.store.nodes(run_id))[1:]] == [CLAMPED, WHERE, FUSED]
    assert len(backend.requests) == 3 and done.usage.calls == 3

    capped = await run_search(service, run_id, backend, limits=Limits(max_attempts=1))
    assert capped.stop_reason == "budget" and capped.new_attempts == 0  # nothing left to spend
