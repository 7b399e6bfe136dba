from __future__ import annotations

import pytest

from stark_mcp.agents import (
    AgentError,
    CodeAgent,
    DebugAgent,
    GeneralistAgent,
    PlanAgent,
    Prompt,
    plan_text,
    render_prompt,
    total_usage,
)
from stark_mcp.llm import LLMCallFailed, LLMReply, ModelPrice, PriceTable, ScriptedBackend
from stark_mcp.problems import Problem
from stark_mcp.records import Usage
from stark_mcp.tree import Tree
from stark_mcp.tree.anchors import BEGIN_MARK, END_MARK

from .samples import CANDIDATE, REFERENCE

FORWARD = "        y = torch.tanh(x)\n        return y * self.scale\n"
SCAFFOLD = REFERENCE.replace(FORWARD, f"        # {BEGIN_MARK}\n{FORWARD}        # {END_MARK}\n")
GOOD_PLAN = f"## Advice\nFuse tanh and scale into one loop.\n\n## Scaffold\n```python\n{SCAFFOLD}```\n"
NO_ANCHORS = f"## Advice\nFuse tanh and scale.\n\n## Scaffold\n```python\n{REFERENCE}```\n"


def prompt_for(role: str, problem: Problem, tree: Tree, node_id: str = "n0",
    plan: str | None = None) -> Prompt:
    return render_prompt(
        role, problem=problem, tree=tree, node_id=node_id, window_ids=[], device="cpu", plan=plan  # type: ignore[arg-type]
    )


@pytest.mark.anyio
async def test_plan_agent_retries_after_invalid_anchors(problem: Problem, tree: Tree) -> None:
    backend = ScriptedBackend([NO_ANCHORS, GOOD_PLAN])
    prompt = prompt_for("plan", problem, tree)
    plan, exchanges = await PlanAgent(backend).run(prompt, REFERENCE)
    assert plan.spans == 1 and plan.advice == "Fuse tanh and scale into one loop."
    assert [e.error is None for e in exchanges] == [False, True]
    assert "no anchors" in (exchanges[0].error or "")
    first, second = backend.requests
    assert first.body == prompt.body
    # The second request repeats the prompt and adds the exact complaint.
    assert second.body.startswith(prompt.body)
    assert "## Your previous reply was rejected" in second.body
    assert "- attempt 1: the scaffold has no anchors" in second.body
    assert (second.system, second.prefix, second.role) == (prompt.system, prompt.prefix, "plan")
    assert exchanges[1].reply is not None and exchanges[1].reply.text == GOOD_PLAN


@pytest.mark.anyio
async def test_plan_agent_gives_up_after_max_attempts(problem: Problem, tree: Tree) -> None:
    drifted = GOOD_PLAN.replace("self.scale = scale", "self.scale = 2 * scale")
    backend = ScriptedBackend([NO_ANCHORS, drifted, "no plan today", GOOD_PLAN])
    with pytest.raises(AgentError) as info:
        await PlanAgent(backend, max_attempts=3).run(prompt_for("plan", problem, tree), REFERENCE)
    error = info.value
    assert "no usable reply in 3 attempt(s)" in str(error) and "no scaffold" in str(error)
    assert len(error.exchanges) == 3 and all(e.error for e in error.exchanges)
    assert "scaffold line 8 differs" in (error.exchanges[1].error or "")
    assert backend.pending == 1  # the fourth reply was never asked for
    assert "- attempt 2: scaffold line 8 differs" in backend.requests[2].body


@pytest.mark.anyio
async def test_code_agent_realizes_the_plan(problem: Problem, tree: Tree) -> None:
    backend = ScriptedBackend([f"Here it is.\n```python\n{CANDIDATE}```\n"])
    plan = plan_text("Fuse tanh and scale into one loop.", SCAFFOLD)
    prompt = prompt_for("code", problem, tree, plan=plan)
    source, exchanges = await CodeAgent(backend).run(prompt)
    assert source == CANDIDATE
    assert len(exchanges) == 1 and exchanges[0].role == "code" and exchanges[0].error is None
    assert f"# {BEGIN_MARK}" in backend.requests[0].body


@pytest.mark.anyio
async def test_code_agent_retries_a_reply_without_model_new(problem: Problem, tree: Tree) -> None:
    plan = plan_text("Fuse.", SCAFFOLD)
    backend = ScriptedBackend([f"```python\n{REFERENCE}```", f"```python\n{CANDIDATE}```"])
    source, exchanges = await CodeAgent(backend).run(prompt_for("code", problem, tree, plan=plan))
    assert source == CANDIDATE
    assert "no class ModelNew" in (exchanges[0].error or "")
    assert "no class ModelNew" in backend.requests[1].body


@pytest.mark.anyio
async def test_code_agent_failure_is_bounded(problem: Problem, tree: Tree) -> None:
    backend = ScriptedBackend(["sorry", "still sorry", "again"])
    with pytest.raises(AgentError) as info:
        await CodeAgent(backend,
            max_attempts=2).run(prompt_for("code", problem, tree, plan=plan_text("F.", SCAFFOLD)))
    assert len(info.value.exchanges) == 2 and backend.pending == 1


@pytest.mark.anyio
async def test_debug_agent_returns_the_fixed_source(problem: Problem, tree: Tree) -> None:
    backend = ScriptedBackend([f"The binding had a stray comma.\n```python\n{CANDIDATE}```"])
    prompt = prompt_for("debug", problem, tree, node_id="n2")
    source, exchanges = await DebugAgent(backend).run(prompt)
    assert source == CANDIDATE and exchanges[0].reply is not None
    assert "expected identifier before ')' token" in backend.requests[0].body


@pytest.mark.anyio
async def test_generalist_agent_uses_structured_output(problem: Problem, tree: Tree) -> None:
    reply = LLMReply(text="", structured={"source": CANDIDATE}, usage=Usage(input_tokens=5, calls=1),
        model="m")
    backend = ScriptedBackend([reply])
    source, _ = await GeneralistAgent(backend).run(prompt_for("generalist", problem, tree, node_id="n1"))
    assert source == CANDIDATE


@pytest.mark.anyio
async def test_agent_refuses_a_prompt_for_another_role(problem: Problem, tree: Tree) -> None:
    backend = ScriptedBackend([CANDIDATE])
    with pytest.raises(AgentError, match="debug agent was given a generalist prompt"):
        await DebugAgent(backend).run(prompt_for("generalist", problem, tree))
    assert backend.requests == []


@pytest.mark.anyio
async def test_backend_failure_propagates_with_the_exchanges_so_far(problem: Problem, tree: Tree) -> None:
    backend = ScriptedBackend([NO_ANCHORS, LLMCallFailed("overloaded", status_code=529)])
    with pytest.raises(LLMCallFailed) as info:
        await PlanAgent(backend).run(prompt_for("plan", problem, tree), REFERENCE)
    exchanges = info.value.exchanges  # type: ignore[attr-defined]
    assert [e.error for e in exchanges][1] == "overloaded"
    assert exchanges[0].reply is not None and exchanges[1].reply is None


@pytest.mark.anyio
async def test_total_usage_sums_every_call(problem: Problem, tree: Tree) -> None:
    prices = PriceTable(models={"scripted": ModelPrice(input=3.0, output=15.0, cache_read=0.3,
        cache_write=3.75)})
    backend = ScriptedBackend([NO_ANCHORS, GOOD_PLAN], prices=prices)
    _, exchanges = await PlanAgent(backend).run(prompt_for("plan", problem, tree), REFERENCE)
    usage = total_usage(exchanges)
    assert usage.calls == 2
    assert usage.input_tokens == sum(e.reply.usage.input_tokens for e in exchanges if e.reply)
    assert usage.cost_usd > 0


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(AgentError, match="at least 1"):
        PlanAgent(ScriptedBackend(), max_attempts=0)
