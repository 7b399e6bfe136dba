"""The paper's Table 3 ablations: STARK with one component off, each checked on what its agents see."""

from __future__ import annotations

import random

import pytest

from stark_mcp.llm import ScriptedBackend
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.strategies import ABLATIONS, STRATEGIES, get_strategy
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Status
from stark_mcp.tree import BEGIN_MARK, Tree, context_window, recent_window

from .replies import CLAMPED, CRASH, FIXED, FUSED, PROBLEM, code_reply, plan_reply

pytestmark = pytest.mark.anyio


async def _run(service: RunService, strategy: str, budget: int, **policy: object) -> str:
    run, _ = await service.create_run(
        problem_from_source(PROBLEM, name="scaled_relu"),
        device="cpu",
        budget=budget,
        seed=5,
        policy={"name": get_strategy(strategy).policy, **policy},
        strategy=strategy,
    )
    return run.id


def test_each_ablation_turns_off_exactly_one_component_of_stark() -> None:
    stark = STRATEGIES["stark"]
    fields = ("policy", "agents", "history", "anchors", "window")
    for component, name in ABLATIONS.items():
        changed = {f for f in fields if getattr(STRATEGIES[name], f) != getattr(stark, f)}
        assert changed == {
            {"roles": "agents", "anchors": "anchors", "windows": "window", "search": "policy"}[component]
        }
    # Without roles, STARK is the paper's search-only baseline.
    assert {f: getattr(STRATEGIES["no_roles"], f) for f in fields} == {
        f: getattr(STRATEGIES["search_only"], f) for f in fields
    }


async def test_no_anchors_plans_are_advice_only_and_the_coder_gets_no_scaffold(service: RunService) -> None:
    run_id = await _run(service, "no_anchors", 1)
    backend = ScriptedBackend()
    backend.enqueue(
        plan_reply(PROBLEM), "## Advice\nFuse relu, scale and shift into one in-place pass.", role="plan"
    )
    backend.enqueue(code_reply(FUSED), role="code")
    await run_search(service, run_id, backend)
    node = (await service.store.nodes(run_id))[1]
    assert node.status is Status.PASSED and node.adherence is None
    assert node.plan == "## Advice\nFuse relu, scale and shift into one in-place pass.\n"
    first_plan, retried_plan, code = backend.requests
    assert BEGIN_MARK not in first_plan.body and "no code block" in first_plan.body
    assert "the reply has a code block: give only the advice" in retried_plan.body  # a scaffold was refused
    assert "Fuse relu, scale and shift into one in-place pass." in code.body
    assert "scaffold" not in code.body.lower() and BEGIN_MARK not in code.body


async def test_no_windows_shows_every_role_the_latest_attempts(service: RunService) -> None:
    # eps=1 forces the path root -> plan (crash) -> debug (fixed) -> plan of the fix, as in the e2e test.
    run_id = await _run(service, "no_windows", 3, eps=1.0)
    backend = ScriptedBackend()
    backend.enqueue(plan_reply(PROBLEM), plan_reply(FIXED, "Use clamp instead of relu."), role="plan")
    backend.enqueue(code_reply(CRASH), code_reply(CLAMPED), role="code")
    backend.enqueue(code_reply(FIXED), role="debug")
    await run_search(service, run_id, backend)
    nodes = await service.store.nodes(run_id)
    assert [(n.id, n.parent_id, n.action) for n in nodes][1:] == [
        ("n1", "n0", Action.PLAN),
        ("n2", "n1", Action.DEBUG),
        ("n3", "n2", Action.PLAN),
    ]
    # When n2 was planned, STARK's plan window for it (its children, and the leaderboard outside
    # its subtree) was empty; the fixed window holds the latest attempts, here the crashed n1.
    before = Tree(nodes[:3])
    assert context_window(before, "n2", "plan", random.Random(0)) == []
    assert recent_window(before, "n2") == ["n1"]
    assert "### Attempt n1 (planned change, parent: n0)" in backend.requests[3].body  # the plan agent at n2


async def test_no_search_samples_from_the_root_with_the_roles_and_their_history(service: RunService) -> None:
    run_id = await _run(service, "no_search", 2)
    backend = ScriptedBackend()
    backend.enqueue(plan_reply(PROBLEM), plan_reply(PROBLEM, "Clamp, then scale and shift."), role="plan")
    backend.enqueue(code_reply(CRASH), code_reply(CLAMPED), role="code")
    await run_search(service, run_id, backend)
    nodes = (await service.store.nodes(run_id))[1:]
    assert [(n.parent_id, n.action) for n in nodes] == [("n0", Action.PLAN), ("n0", Action.PLAN)]
    assert (await service.get_run(run_id)).policy["name"] == "sampling"
    # Unlike ma_only's independent samples, the second plan sees the first attempt.
    assert "### Attempt n1 (planned change, parent: n0)" in backend.requests[2].body
