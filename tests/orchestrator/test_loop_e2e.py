"""Algorithm 1 end to end on the CPU: scripted agents, the real evaluator, a real SQLite file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stark_mcp.llm import ScriptedBackend
from stark_mcp.orchestrator.events import SearchEvent
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Status

from .replies import CLAMPED, CRASH, FIXED, PRICED, PROBLEM, code_reply, plan_reply

pytestmark = pytest.mark.anyio


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_stark_run_debugs_a_failure_reaches_its_budget_and_exports_a_runnable_best(
    service: RunService, tmp_path: Path
) -> None:
    # eps=1 makes every step explore a random expandable leaf; with one leaf at each step the
    # path is forced: root -> plan (crashes) -> debug (fixed) -> plan (faster).
    run, _root = await service.create_run(
        problem_from_source(PROBLEM, name="scaled_relu"), device="cpu", budget=3, seed=11,
        policy={"name": "stark", "eps": 1.0}, strategy="stark",
    )
    backend = ScriptedBackend(prices=PRICED)
    backend.enqueue(plan_reply(PROBLEM), plan_reply(FIXED, "Use clamp instead of relu."), role="plan")
    backend.enqueue(code_reply(CRASH), code_reply(CLAMPED), role="code")
    backend.enqueue(code_reply(FIXED), role="debug")
    events: list[SearchEvent] = []

    async def collect(event: SearchEvent) -> None:
        events.append(event)

    summary = await run_search(service, run.id, backend, progress=collect)

    nodes = {n.id: n for n in await service.store.nodes(run.id)}
    assert [(n.id, n.parent_id, n.action) for n in nodes.values()] == [
        ("n0", None, Action.ROOT), ("n1", "n0", Action.PLAN), ("n2", "n1", Action.DEBUG), ("n3", "n2",
            Action.PLAN),
    ]
    assert nodes["n1"].status is Status.RUNTIME_ERROR
    assert nodes["n2"].status is Status.PASSED and nodes["n3"].status is Status.PASSED
    assert nodes["n2"].plan == nodes["n1"].plan  # a debug child keeps its parent's plan
    assert nodes["n1"].adherence is not None and 0 < nodes["n1"].adherence <= 1
    assert nodes["n2"].adherence is None  # measured only against a plan's own spans
    assert [r.role for r in backend.requests] == ["plan", "code", "debug", "plan", "code"]
    assert backend.pending == 0

    # Every exchange is stored and attached to the node it produced, with its usage on the node.
    for node_id, roles in {"n1": ["plan", "code"], "n2": ["debug"], "n3": ["plan", "code"]}.items():
        exchanges = await service.store.exchanges(run.id, node_id)
        assert [e.role for e in exchanges] == roles
        assert nodes[node_id].usage.cost_usd == pytest.approx(sum(e.usage.cost_usd for e in exchanges))
        assert all(e.request["body"] and e.reply for e in exchanges)

    assert summary.stop_reason == "budget" and summary.status == "finished"
    assert summary.attempts == 3 and summary.new_attempts == 3 and summary.strategy == "stark"
    best = await service.best(run.id)
    assert best is not None and summary.best_node_id == best.id
    assert summary.usage.calls == 5 and summary.usage.cost_usd > 0
    assert (await service.get_run(run.id)).status == "finished"
    kinds = [e.kind for e in events]
    assert kinds[0] == "started" and kinds[-1] == "finished"
    assert kinds.count("recorded") == 3 and kinds.count("selected") == 3 and kinds.count("llm") == 5
    assert [e.attempt for e in events if e.kind == "recorded"] == [1, 2, 3]
    assert events[-1].best_node_id == best.id and events[-1].cost_usd == pytest.approx(summary.usage.cost_usd)

    exported = tmp_path / "best_kernel.py"
    kernel = await service.export(run.id)
    assert kernel.node_id == best.id
    exported.write_text(kernel.source)
    done = subprocess.run([sys.executable, str(exported)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "relative error vs reference" in done.stdout
    # Timed as the evaluator timed it: one CPU thread, its warm-up and call count.
    assert "1 CPU thread(s)" in done.stdout and "on cpu" in done.stdout
