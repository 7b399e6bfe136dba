"""Each comparison strategy for a short budget: its policy, its agents and what its prompts show."""

from __future__ import annotations

import pytest

from stark_mcp.agents import PLAN_FOCI
from stark_mcp.llm import ScriptedBackend
from stark_mcp.orchestrator.errors import InvalidInput
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.strategies import STRATEGIES, get_strategy
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Status

from .replies import CLAMPED, CRASH, FIXED, FUSED, PROBLEM, WRONG, code_reply, plan_reply

pytestmark = pytest.mark.anyio


async def _run(service: RunService, strategy: str, budget: int, **policy: object) -> str:
    run, _ = await service.create_run(
        problem_from_source(PROBLEM, name="scaled_relu"), device="cpu", budget=budget, seed=5,
        policy={"name": get_strategy(strategy).policy, **policy}, strategy=strategy,
    )
    return run.id


async def test_sampling_draws_independent_attempts_from_the_root(service: RunService) -> None:
    run_id = await _run(service, "sampling", 2)
    backend = ScriptedBackend()
    backend.enqueue(code_reply(WRONG), code_reply(FUSED), role="generalist")
    summary = await run_search(service, run_id, backend)
    nodes = (await service.store.nodes(run_id))[1:]
    assert [(n.parent_id, n.action, n.status) for n in nodes] == [
        ("n0", Action.PLAN, Status.WRONG_OUTPUT), ("n0", Action.PLAN, Status.PASSED),
    ]
    assert [r.role for r in backend.requests] == ["generalist", "generalist"]
    # Best-of-K: the second sample does not see the first.
    assert "No earlier attempts" in backend.requests[1].body and "n1" not in backend.requests[1].body
    assert summary.best_node_id == "n2" and summary.strategy == "sampling"


async def test_reflexion_refines_the_latest_attempt_with_its_feedback(service: RunService) -> None:
    run_id = await _run(service, "reflexion", 3)
    backend = ScriptedBackend()
    backend.enqueue(code_reply(CRASH), code_reply(FIXED), code_reply(FUSED), role="generalist")
    await run_search(service, run_id, backend)
    nodes = (await service.store.nodes(run_id))[1:]
    assert [(n.id, n.parent_id, n.action) for n in nodes] == [
        ("n1", "n0", Action.PLAN), ("n2", "n1", Action.DEBUG), ("n3", "n2", Action.PLAN),
    ]
    assert all(n.plan is None and n.adherence is None for n in nodes)
    repair = backend.requests[1].body
    assert "latest attempt is n1" in repair and "offset" in repair  # n1's error is in the feedback


async def test_search_only_uses_the_stark_search_with_one_generalist_agent(service: RunService) -> None:
    run_id = await _run(service, "search_only", 2, eps=1.0)  # every step explores the only leaf
    backend = ScriptedBackend()
    backend.enqueue(code_reply(CRASH), code_reply(FIXED), role="generalist")
    await run_search(service, run_id, backend)
    nodes = (await service.store.nodes(run_id))[1:]
    assert [(n.parent_id, n.action, n.status) for n in nodes] == [
        ("n0", Action.PLAN, Status.RUNTIME_ERROR), ("n1", Action.DEBUG, Status.PASSED),
    ]
    assert [r.role for r in backend.requests] == ["generalist", "generalist"]
    assert (await service.get_run(run_id)).policy["name"] == "stark"


async def test_ma_only_plans_and_codes_every_attempt_from_the_root_without_debugging(
    service: RunService,
) -> None:
    run_id = await _run(service, "ma_only", 2)
    backend = ScriptedBackend()
    backend.enqueue(plan_reply(PROBLEM), plan_reply(PROBLEM, "Clamp, then scale and shift."), role="plan")
    backend.enqueue(code_reply(CRASH), code_reply(CLAMPED), role="code")
    await run_search(service, run_id, backend)
    nodes = (await service.store.nodes(run_id))[1:]
    assert [(n.parent_id, n.action, n.status) for n in nodes] == [
        ("n0", Action.PLAN, Status.RUNTIME_ERROR), ("n0", Action.PLAN, Status.PASSED),
    ]
    assert all(n.plan and "<<<IMPROVE BEGIN>>>" in n.plan and n.adherence is not None for n in nodes)
    assert [r.role for r in backend.requests] == ["plan", "code", "plan", "code"]
    assert "No earlier attempts" in backend.requests[2].body  # independent of the failed n1
    # Identical prompts would give near-identical plans: a rotating focus theme keeps samples apart.
    assert PLAN_FOCI[0] in backend.requests[0].body and PLAN_FOCI[1] in backend.requests[2].body


def test_strategy_table_matches_the_documented_mapping() -> None:
    table = {name: (s.policy, s.agents, s.history) for name, s in STRATEGIES.items()}
    assert table == {
        "stark": ("stark", "roles", True),
        "sampling": ("sampling", "generalist", False),
        "reflexion": ("reflexion", "generalist", True),
        "search_only": ("stark", "generalist", True),
        "ma_only": ("sampling", "roles", False),
        "no_roles": ("stark", "generalist", True),
        "no_anchors": ("stark", "roles", True),
        "no_windows": ("stark", "roles", True),
        "no_search": ("sampling", "roles", True),
    }
    with pytest.raises(InvalidInput, match="unknown strategy 'beam'"):
        get_strategy("beam")
