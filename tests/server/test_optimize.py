"""optimize: the internal loop over a scripted backend, and the error without any backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from stark_mcp.llm import ScriptedBackend, backend_from_settings

from .support import MODES, PRICED, PROBLEM, ProgressLog, anchored_plan, error_text, make_server, ok, source

pytestmark = pytest.mark.anyio


def fenced(text: str) -> str:
    return f"```python\n{text}```\n"


@pytest.mark.parametrize("mode", MODES)
async def test_optimize_runs_the_loop_with_progress(tmp_path: Path, mode: str) -> None:
    backend = ScriptedBackend(prices=PRICED)
    backend.enqueue(anchored_plan(PROBLEM.read_text()), role="plan")
    backend.enqueue(fenced(source("cand_clamp")), role="code")
    server = make_server(tmp_path, backend_factory=lambda: backend)
    progress = ProgressLog()
    async with Client(server, mode=mode) as client:
        run_id = ok(await client.call_tool("create_run",
            {"problem": str(PROBLEM), "budget": 3, "seed": 2}))["run_id"]
        result = ok(await client.call_tool("optimize", {"run_id": run_id, "budget": 1},
            progress_callback=progress))
        assert result["attempts"] == 1 and result["attempts_left"] == 2
        assert result["best_node_id"] == "n1" and result["best_runtime_ms"] > 0
        assert result["cost_usd"] > 0 and result["stop_reason"] == "budget"
        node = ok(await client.call_tool("get_node", {"run_id": run_id, "node_id": "n1"}))
        assert node["source"].strip() == source("cand_clamp").strip()
        assert node["plan"] and "<<<IMPROVE BEGIN>>>" in node["plan"]
        assert node["evaluation"]["status"] == "passed"
    assert [r.role for r in backend.requests] == ["plan", "code"]
    progress.assert_increasing()
    assert progress.events[-1][:2] == (1.0, 1.0)
    assert any("recorded n1" in (m or "") for _, _, m in progress.events)


@pytest.mark.parametrize("mode", MODES)
async def test_optimize_without_a_backend_explains_the_alternatives(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "STARK_LLM", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    server = make_server(tmp_path, backend_factory=backend_from_settings)
    async with Client(server, mode=mode) as client:
        message = error_text(await client.call_tool("optimize", {"run_id": "r-whatever"}))
        assert "ANTHROPIC_API_KEY" in message and "select_node" in message and "add_child" in message


@pytest.mark.parametrize("mode", MODES)
async def test_optimize_unknown_run_calls_no_model(tmp_path: Path, mode: str) -> None:
    backend = ScriptedBackend()
    server = make_server(tmp_path, backend_factory=lambda: backend)
    async with Client(server, mode=mode) as client:
        assert "list_runs" in error_text(await client.call_tool("optimize", {"run_id": "r-nothere"}))
        assert "budget" in error_text(await client.call_tool("optimize",
            {"run_id": "r-nothere", "budget": 0}))
    assert backend.requests == []


async def test_optimize_stops_once_the_best_attempt_reaches_stop_at_sol(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    for _ in range(2):
        backend.enqueue(anchored_plan(PROBLEM.read_text()), role="plan")
    backend.enqueue(fenced(source("cand_clamp")), role="code")
    server = make_server(tmp_path, backend_factory=lambda: backend)
    async with Client(server, mode=MODES[0]) as client:
        run_id = ok(await client.call_tool("create_run",
            {"problem": str(PROBLEM), "budget": 3, "seed": 2}))["run_id"]
        result = ok(await client.call_tool("optimize", {"run_id": run_id, "stop_at_sol": 1e-6}))
        assert result["stop_reason"] == "sol" and result["attempts"] == 1
        assert "n1 reached" in result["message"] and "--stop-at-sol" in result["message"]
        board = ok(await client.call_tool("leaderboard", {"run_id": run_id}))
        assert board["entries"][0]["sol_fraction"] > 0 and board["entries"][0]["sol_bound"] == "memory"
        assert "greater than 0" in error_text(
            await client.call_tool("optimize", {"run_id": run_id, "stop_at_sol": 0})
        )
    assert [r.role for r in backend.requests] == ["plan", "code"]
