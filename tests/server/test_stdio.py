"""`stark-mcp serve` as a real subprocess over stdio: a small CPU search end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from .support import PROBLEM, ProgressLog, anchored_plan, ok, source

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]


def server_env(home: Path) -> dict[str, str]:
    return {
        "STARK_HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "HOME": os.environ.get("HOME", str(home)),
    }


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_stdio_search_end_to_end(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stark_mcp", "serve", "--baselines", "eager", "--root", str(PROBLEM.parent)],
        env=server_env(tmp_path), cwd=str(tmp_path),
    )
    progress = ProgressLog()
    async with Client(params) as client:
        created = ok(await client.call_tool(
            "create_run", {"problem": str(PROBLEM), "budget": 3, "seed": 11}, progress_callback=progress
        ))
        progress.assert_increasing()
        assert progress.events
        run_id = created["run_id"]

        selected = ok(await client.call_tool("select_node", {"run_id": run_id}))
        assert (selected["node_id"], selected["action"]) == ("n0", "plan")
        ok(await client.call_tool("build_context", {"run_id": run_id, "node_id": "n0", "role": "plan"}))
        plan = anchored_plan(PROBLEM.read_text())
        ok(await client.call_tool("build_context",
            {"run_id": run_id, "node_id": "n0", "role": "code", "plan": plan}))
        first = ok(await client.call_tool(
            "add_child", {"run_id": run_id, "parent_id": "n0", "source": source("cand_clamp"), "plan": plan},
            progress_callback=progress,
        ))
        assert first["status"] == "passed"

        selected = ok(await client.call_tool("select_node", {"run_id": run_id}))
        second = ok(await client.call_tool(
            "add_child", {"run_id": run_id, "parent_id": selected["node_id"], "source": source("cand_wrong")}
        ))
        assert second["status"] == "wrong_output" and second["attempts_left"] == 1

        board = ok(await client.call_tool("leaderboard", {"run_id": run_id}))["entries"]
        assert [e["node_id"] for e in board] == [first["node_id"]]
        tree = json.loads((await client.read_resource(f"stark://runs/{run_id}/tree")).contents[0].text)
        assert len(tree["nodes"]) == 3
    assert (tmp_path / "stark.db").exists()


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_stdout_carries_only_protocol_messages(tmp_path: Path) -> None:
    """Raw JSON-RPC as a legacy host sends it: every stdout line must be a JSON-RPC message."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_runs", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "select_node", "arguments": {"run_id": "r-nothere"}}},
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "stark_mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=server_env(tmp_path), cwd=tmp_path, text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    replies: dict[int, dict] = {}
    try:
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            if "id" not in request:
                continue
            while request["id"] not in replies:
                line = process.stdout.readline()
                assert line, "the server closed stdout early"
                message = json.loads(line)
                assert message["jsonrpc"] == "2.0"
                if "id" in message:
                    replies[message["id"]] = message
    finally:
        # End of input shuts the server down; communicate() closes stdin and drains the rest.
        rest, _ = process.communicate(timeout=30)
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in rest.splitlines() if line.strip())
    assert replies[1]["result"]["serverInfo"]["name"] == "stark-mcp"
    assert "create_run" in replies[1]["result"]["instructions"]
    assert len(replies[2]["result"]["tools"]) == 12
    assert replies[3]["result"]["structuredContent"] == {"runs": []}
    assert replies[4]["result"]["isError"] is True
    assert "r-nothere" in replies[4]["result"]["content"][0]["text"]
