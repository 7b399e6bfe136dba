"""``--stop-at-sol``: a scripted run ends once its best attempt reaches a fraction of its floor."""

from __future__ import annotations

import pytest

from stark_mcp.llm import ScriptedBackend
from stark_mcp.orchestrator.limits import Limits
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.report import render_leaderboard, render_tree
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.problems import problem_from_source

from .replies import CLAMPED, FUSED, PROBLEM, WHERE, code_reply

pytestmark = pytest.mark.anyio


async def _run(service: RunService, budget: int) -> str:
    run, root = await service.create_run(
        problem_from_source(PROBLEM, name="scaled_relu"), device="cpu", budget=budget, seed=5,
        policy="sampling", strategy="sampling",
    )
    # the reference itself stands against the floor from the start
    assert root.evaluation is not None and root.evaluation.sol is not None
    assert root.evaluation.sol.fraction is not None and root.evaluation.sol.bound == "memory"
    return run.id


async def test_a_run_whose_best_attempt_reaches_the_fraction_stops_and_says_why(service: RunService) -> None:
    run_id = await _run(service, 3)
    backend = ScriptedBackend([code_reply(s) for s in (FUSED, CLAMPED, WHERE)])
    summary = await run_search(service, run_id, backend, limits=Limits(stop_at_sol=1e-6))
    assert summary.stop_reason == "sol" and summary.new_attempts == 1
    assert summary.status == "interrupted"
    assert "n1 reached" in (summary.message or "") and "--stop-at-sol 1e-06" in (summary.message or "")
    assert len(backend.requests) == 1

    # resumed with the same rule, a run already there makes no attempt; without it, it goes on
    again = await run_search(service, run_id, backend, limits=Limits(stop_at_sol=1e-6))
    assert again.stop_reason == "sol" and again.new_attempts == 0
    rest = await run_search(service, run_id, backend, limits=Limits(stop_at_sol=1e6))
    assert rest.stop_reason == "budget" and rest.new_attempts == 2

    nodes = await service.store.nodes(run_id)
    board = render_leaderboard(nodes)
    assert "of SOL" in board and "speed of light: the best attempt" in board
    tree = render_tree(await service.get_run(run_id), nodes).splitlines()
    assert next(line for line in tree if line.startswith("node")).rstrip().endswith("SOL")
    root_line = next(line for line in tree if line.startswith("n0 "))
    first_line = next(line for line in tree if line.split()[1:2] == ["n1"])
    assert root_line.rstrip().endswith("%") and first_line.rstrip().endswith("%")
