"""Expansions that produce no attempt, fatal backend errors and cancellation: nothing vanishes.

These runs never reach the evaluator, so their roots are recorded directly in the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stark_mcp.evaluator import Evaluator
from stark_mcp.llm import LLMCallFailed, LLMReply, LLMRequest, ScriptedBackend
from stark_mcp.orchestrator.errors import InvalidInput
from stark_mcp.orchestrator.events import SearchEvent
from stark_mcp.orchestrator.expansion import INTERRUPTED
from stark_mcp.orchestrator.limits import Limits
from stark_mcp.orchestrator.loop import run_search, strategy_for
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action
from stark_mcp.store import Store

from .replies import PRICED, PROBLEM, plan_reply

pytestmark = pytest.mark.anyio


@pytest.fixture
async def bare(tmp_path: Path) -> AsyncIterator[RunService]:
    async with await Store.open(tmp_path / "stark.db") as store:
        yield RunService(store, Evaluator(tmp_path / "cache"))


async def _run(service: RunService, policy: str, strategy: str, budget: int = 3) -> str:
    run = await service.store.create_run(
        problem=problem_from_source(PROBLEM, name="scaled_relu"), device="cpu", strategy=strategy,
        policy={"name": policy}, budget=budget, seed=1,
    )
    await service.store.add_node(run.id, parent_id=None, action=Action.ROOT, source=PROBLEM)
    return run.id


class Gate:
    """A backend that answers from a script, then waits forever once the script runs dry."""

    name = "gate"

    def __init__(self, *replies: str) -> None:
        self.script = ScriptedBackend(replies, prices=PRICED)
        self.waiting = asyncio.Event()

    async def complete(self, request: LLMRequest) -> LLMReply:
        if self.script.pending:
            return await self.script.complete(request)
        self.waiting.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_failed_expansions_stay_logged_do_not_use_budget_and_stop_the_run(bare: RunService) -> None:
    run_id = await _run(bare, "sampling", "sampling")
    # The generalist is asked twice per expansion; both replies lack code, so each expansion fails.
    backend = ScriptedBackend(["no code, sorry"] * 6, prices=PRICED)
    events: list[SearchEvent] = []

    async def collect(event: SearchEvent) -> None:
        events.append(event)

    summary = await run_search(bare, run_id, backend, limits=Limits(max_consecutive_failures=3),
        progress=collect)

    assert summary.stop_reason == "failures" and summary.status == "interrupted"
    assert summary.attempts == 0 and len(summary.failed_expansions) == 3
    assert all("no usable reply in 2 attempt(s)" in f.error for f in summary.failed_expansions)
    logged = await bare.store.exchanges(run_id)
    assert len(logged) == 6 and all(e.node_id is None and e.error and e.reply for e in logged)
    assert sorted(i for f in summary.failed_expansions for i in f.exchange_ids) == [e.id for e in logged]
    assert summary.usage.calls == 6 and summary.usage.cost_usd > 0  # failed calls still cost money
    assert [e.kind for e in events].count("failed") == 3
    assert (await bare.get_run(run_id)).status == "interrupted"


async def test_a_refused_key_stops_at_once(bare: RunService) -> None:
    run_id = await _run(bare, "sampling", "sampling")
    backend = ScriptedBackend([LLMCallFailed("invalid x-api-key", status_code=401)] * 3, prices=PRICED)
    summary = await run_search(bare, run_id, backend)
    assert summary.stop_reason == "llm_error" and "invalid x-api-key" in summary.message
    assert len(summary.failed_expansions) == 1 and backend.pending == 2
    [exchange] = await bare.store.exchanges(run_id)
    assert exchange.error == "invalid x-api-key" and exchange.reply == ""


async def test_cancellation_marks_the_run_interrupted_and_keeps_the_calls_made(bare: RunService) -> None:
    run_id = await _run(bare, "sampling", "ma_only")
    # One rejected plan reply (no anchors), then the retry hangs until the search is cancelled.
    backend = Gate("## Advice\nDo it.\n\n## Scaffold\n```python\nprint(1)\n```\n")
    task = asyncio.create_task(run_search(bare, run_id, backend))
    await asyncio.wait_for(backend.waiting.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await bare.get_run(run_id)).status == "interrupted"
    [exchange] = await bare.store.exchanges(run_id)
    assert exchange.role == "plan" and exchange.node_id is None and exchange.error == INTERRUPTED
    assert await bare.store.count_nodes(run_id) == 0


async def test_a_finished_agent_call_is_logged_before_the_next_agent_runs(bare: RunService) -> None:
    run_id = await _run(bare, "sampling", "ma_only")
    backend = Gate(plan_reply(PROBLEM))  # the plan is accepted, then the code agent hangs
    task = asyncio.create_task(run_search(bare, run_id, backend))
    await asyncio.wait_for(backend.waiting.wait(), 10)
    [exchange] = await bare.store.exchanges(run_id)  # already stored while the run goes on
    assert exchange.role == "plan" and exchange.error is None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_strategy_must_match_the_policy_the_run_records(bare: RunService) -> None:
    run_id = await _run(bare, "sampling", "sampling")
    with pytest.raises(InvalidInput, match="needs policy 'stark'"):
        await run_search(bare, run_id, ScriptedBackend(), strategy="search_only")
    with pytest.raises(InvalidInput, match="parallel must be at least 1"):
        await run_search(bare, run_id, ScriptedBackend(), parallel=0)
    assert (await bare.get_run(run_id)).status == "created"  # refused before anything changed


async def test_a_run_created_over_mcp_is_driven_with_roles_under_its_own_policy(bare: RunService) -> None:
    run_id = await _run(bare, "greedy", "mcp")
    strategy = strategy_for(await bare.get_run(run_id), None)
    assert (strategy.name, strategy.policy, strategy.agents, strategy.history) == ("mcp", "greedy", "roles",
        True)
    with pytest.raises(InvalidInput, match="needs policy 'stark'"):
        strategy_for(await bare.get_run(run_id), "stark")


async def test_a_parallel_selection_steers_off_a_node_already_being_debugged(bare: RunService) -> None:
    from stark_mcp.orchestrator.loop import _Search
    from stark_mcp.records import Evaluation, Status
    from stark_mcp.tree import PolicyConfig, Selection

    run_id = await _run(bare, "stark", "stark")
    failing = Evaluation(status=Status.RUNTIME_ERROR, reason="exception", message="boom")
    for _ in range(2):
        await bare.store.add_node(run_id, parent_id="n0", action=Action.PLAN, source=PROBLEM,
            evaluation=failing)
    # eps=1: every step explores one of the two failing leaves n1, n2 and debugs it.
    explore = PolicyConfig(name="stark", eps=1.0).model_dump()
    run = (await bare.get_run(run_id)).model_copy(update={"policy": explore})
    steered: list[str] = []
    for seed in range(40):
        search = _Search(bare, run.model_copy(update={"seed": seed}), strategy_for(run, None),
            ScriptedBackend(),
                         Limits(), None)
        if (await search._select(1)).node_id != "n1":  # nothing in flight: the policy's own choice
            continue
        search.in_flight = {0: Selection(node_id="n1", action="debug", reason="being debugged")}
        choice = await search._select(1)
        assert choice.action == "debug"
        steered.append(choice.node_id)
    # Re-drawn up to 8 times, a coin flip each, the selection leaves n1 to the worker already on it.
    assert len(steered) >= 10 and steered.count("n2") >= len(steered) - 1
