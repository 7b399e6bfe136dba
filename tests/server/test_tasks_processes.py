"""MCP tasks against real server processes: over stdio, over HTTP, and a server killed mid-task.

A restarted server answers ``tasks/get`` from the store: the finished task with its result, the
one that was running with ``failed`` and the reason, never "unknown task".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from stark_mcp.server.tasks.client import TasksClient, get_task, outcome, start_tool, wait_task
from stark_mcp.server.tasks.wire import CreateTaskResult

from .support import FIXTURES, PROBLEM, ok, processes_named, sleeper, source
from .test_http import free_port, wait_listening
from .test_stdio import server_env

pytestmark = pytest.mark.anyio


def serve_http(home: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "stark_mcp", "serve", "--http", "--host", "127.0.0.1", "--port", str(port),
         "--root", str(FIXTURES),
         "--baselines", "eager"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=server_env(home), cwd=home, text=True,
    )


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_a_server_killed_mid_task_answers_for_its_tasks_after_a_restart(tmp_path: Path) -> None:
    marker = "stark-task-kill"
    port = free_port()
    first = serve_http(tmp_path, port)
    try:
        wait_listening(port, first)
        async with Client(f"http://127.0.0.1:{port}/mcp", extensions=[TasksClient(poll_cap_s=0.1)]) as client:
            created = await client.call_tool("create_run", {"problem": str(PROBLEM), "budget": 3})
            run_id = ok(created)["run_id"]
            finished = await start_tool(client.session, "evaluate_kernel",
                                        {"run_id": run_id, "source": source("cand_clamp")})
            assert isinstance(finished, CreateTaskResult)
            with anyio.fail_after(240):
                before = await wait_task(client.session, finished.task_id, poll_cap_s=0.1)
            assert before.status == "completed"
            running = await start_tool(client.session, "add_child",
                                       {"run_id": run_id, "parent_id": "n0", "source": sleeper(marker)})
            assert isinstance(running, CreateTaskResult)
            with anyio.fail_after(120):
                while not processes_named(marker):
                    await anyio.sleep(0.1)
            working = await get_task(client.session, running.task_id)
            assert working.status == "working" and (working.status_message or "").startswith("child of n0: ")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=20)
    finally:
        stop(first)
        for pid in processes_named(marker):  # the killed server's candidate, if its jail outlived it
            os.kill(pid, signal.SIGKILL)

    port = free_port()
    second = serve_http(tmp_path, port)
    try:
        wait_listening(port, second)
        async with Client(f"http://127.0.0.1:{port}/mcp", extensions=[TasksClient()]) as client:
            after = await get_task(client.session, finished.task_id)
            assert after.status == "completed" and after.result == before.result
            assert outcome(after).structured_content["status"] == "passed"
            lost = await get_task(client.session, running.task_id)
            assert lost.status == "failed" and lost.error is not None and lost.error["code"] == -32603
            assert "stopped before it finished" in lost.error["message"]
            assert "stopped before it finished" in (lost.status_message or "")
            node = ok(await client.call_tool("get_node", {"run_id": run_id, "node_id": "n0"}))
            assert node["children"] == []  # the attempt the kill interrupted was never half recorded
            # The run goes on: an attempt over HTTP as a task, resolved by Client.call_tool.
            added = ok(await client.call_tool("add_child", {"run_id": run_id, "parent_id": "n0",
                                                            "source": source("cand_clamp")}))
            assert added["node_id"] == "n1" and added["attempts_left"] == 2
    finally:
        stop(second)


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_tasks_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stark_mcp", "serve", "--baselines", "eager", "--root", str(FIXTURES)],
        env=server_env(tmp_path), cwd=str(tmp_path),
    )
    async with Client(params, extensions=[TasksClient(poll_cap_s=0.1)]) as client:
        created = await start_tool(client.session, "create_run", {"problem": str(PROBLEM), "budget": 2})
        assert isinstance(created, CreateTaskResult)
        with anyio.fail_after(240):
            run_id = ok(outcome(await wait_task(client.session, created.task_id, poll_cap_s=0.1)))["run_id"]
        handle = await start_tool(client.session, "add_child",
                                  {"run_id": run_id, "parent_id": "n0", "source": source("cand_where")})
        assert isinstance(handle, CreateTaskResult) and handle.status == "working"
        with anyio.fail_after(240):
            state = await wait_task(client.session, handle.task_id, poll_cap_s=0.1)
        assert state.status == "completed" and state.status_message.startswith("n1 passed, ")
        assert state.status_message.endswith("; 1/2 attempts")
