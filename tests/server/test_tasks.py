"""MCP tasks (SEP-2663) through a real client that declares the extension, in process.

Each long tool's whole life as a task, polling, cancelling, input_required, 8 concurrent add_child
tasks on a budget of 4, and the blocking call, unchanged, for clients without the extension.
Over stdio and HTTP, with a server killed mid-task: test_tasks_processes.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from stark_mcp.llm import ScriptedBackend
from stark_mcp.server.tasks.client import (
    TasksClient,
    cancel_task,
    get_task,
    outcome,
    start_tool,
    update_task,
    wait_task,
)
from stark_mcp.server.tasks.wire import CreateTaskResult, GetTaskResult

from .blocking_recording import RECORDINGS, masked, record
from .support import MODES, PRICED, PROBLEM, anchored_plan, make_server, ok, processes_named, sleeper, source

pytestmark = pytest.mark.anyio
FAST_POLL = 0.05


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data directory for the module, so the baselines are timed once."""
    return tmp_path_factory.mktemp("tasks-home")


def tasks_client(server: Any, **kwargs: Any) -> Client:
    return Client(server, extensions=[TasksClient(poll_cap_s=FAST_POLL, **kwargs)])


async def started(client: Client, tool: str, arguments: dict[str, Any]) -> CreateTaskResult:
    handle = await start_tool(client.session, tool, arguments)
    assert isinstance(handle, CreateTaskResult), handle
    return handle


async def settled(client: Client, handle: CreateTaskResult) -> GetTaskResult:
    with anyio.fail_after(240):
        return await wait_task(client.session, handle.task_id, poll_cap_s=FAST_POLL)


async def new_run(client: Client, budget: int, seed: int = 3) -> str:
    handle = await started(client, "create_run", {"problem": str(PROBLEM), "budget": budget, "seed": seed})
    return ok(outcome(await settled(client, handle)))["run_id"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_the_extension_gets_todays_blocking_call(home: Path, mode: str) -> None:
    """The recording was made by the server before tasks existed (tests/server/blocking_recording.py)."""
    async with Client(make_server(home), mode=mode) as client:
        turns = await record(client)
    assert masked(turns) + "\n" == (RECORDINGS / f"blocking-{mode}.json").read_text()


async def test_each_long_tool_lives_a_whole_task(home: Path) -> None:
    backend = ScriptedBackend(prices=PRICED)
    backend.enqueue(anchored_plan(PROBLEM.read_text()), role="plan")
    backend.enqueue(f"```python\n{source('cand_where')}```\n", role="code")
    async with tasks_client(make_server(home, backend_factory=lambda: backend)) as client:
        handle = await started(client, "create_run", {"problem": str(PROBLEM), "budget": 4, "seed": 3})
        assert handle.status == "working" and handle.ttl_ms and handle.poll_interval_ms
        assert handle.created_at.endswith("Z") and handle.status_message
        # A handle is given out only once tasks/get resolves it.
        assert (await get_task(client.session, handle.task_id)).task_id == handle.task_id
        done = await settled(client, handle)
        run_id = ok(outcome(done))["run_id"]
        assert done.status == "completed" and re.fullmatch(
            rf"run {run_id} created, budget 4; eager [\d.e-]+ ms", done.status_message or ""
        ), done.status_message

        evaluated = await settled(client, await started(
            client, "evaluate_kernel", {"run_id": run_id, "source": source("cand_clamp")}))
        assert ok(outcome(evaluated))["status"] == "passed"
        assert re.fullmatch(r"evaluation passed, [\d.]+x \(not recorded\)", evaluated.status_message or "")

        optimized = await settled(client, await started(client, "optimize", {"run_id": run_id, "budget": 1}))
        result = ok(outcome(optimized))
        assert result["attempts"] == 1 and result["attempts_left"] == 3
        assert re.fullmatch(rf"optimize {run_id}: 1 attempts, best n\d+ [\d.]+x; 1/4 attempts; \$\d+\.\d\d",
                            optimized.status_message or ""), optimized.status_message

        child = await started(client, "add_child", {"run_id": run_id, "parent_id": "n0",
                                                    "source": source("cand_clamp")})
        seen = set()
        while (state := await get_task(client.session, child.task_id)).status == "working":
            seen.add(state.status_message)
            await anyio.sleep(FAST_POLL)
        assert all((m or "").startswith("child of n0: ") and m.endswith(" s") for m in seen), seen
        assert state.status == "completed" and ok(outcome(state))["node_id"] == "n2"
        assert re.fullmatch(r"n2 passed, [\d.]+x; 2/4 attempts", state.status_message or ""), state

        profiled = await settled(client, await started(client, "profile_kernel",
                                                       {"run_id": run_id, "node_id": "n2"}))
        assert profiled.status == "completed" and profiled.result is not None

        # A tool error is a completed task with isError (failed is for JSON-RPC errors only).
        bad = await settled(client, await started(client, "add_child", {
            "run_id": run_id, "parent_id": "n99", "source": source("cand_clamp")}))
        assert bad.status == "completed" and bad.result and bad.result["isError"] is True
        # Short tools answer inline even to a client that declared the extension.
        inline = await start_tool(client.session, "select_node", {"run_id": run_id})
        assert not isinstance(inline, CreateTaskResult)
        # Client.call_tool resolves a task handle transparently.
        assert ok(await client.call_tool("evaluate_kernel", {"run_id": run_id,
                                                             "source": source("cand_wrong")}))["status"]


async def test_cancel_stops_the_evaluation_and_records_nothing(home: Path) -> None:
    marker = "stark-task-cxl"
    async with tasks_client(make_server(home)) as client:
        run_id = await new_run(client, budget=2)
        handle = await started(client, "add_child", {"run_id": run_id, "parent_id": "n0",
                                                     "source": sleeper(marker)})
        with anyio.fail_after(120):
            while not processes_named(marker):
                await anyio.sleep(0.1)
        left_during = ok(await client.call_tool("select_node", {"run_id": run_id}))["attempts_left"]
        await cancel_task(client.session, handle.task_id)
        state = await settled(client, handle)
        assert state.status == "cancelled" and "cancelled while" in (state.status_message or "")
        with anyio.fail_after(30):
            while processes_named(marker):
                await anyio.sleep(0.1)
        nodes = ok(await client.call_tool("get_node", {"run_id": run_id, "node_id": "n0"}))["children"]
        assert nodes == []  # not recorded, not half recorded
        assert left_during == 1  # the attempt in flight held one unit of the budget...
        after = ok(await client.call_tool("select_node", {"run_id": run_id}))
        assert after["attempts_left"] == 2  # ...and gave it back
        await cancel_task(client.session, handle.task_id)  # cancelling a settled task is acknowledged
        assert (await get_task(client.session, handle.task_id)).status == "cancelled"


@pytest.mark.parametrize("answer", [{"action": "accept", "content": {"attempts": 1}}, {"action": "decline"}])
async def test_optimize_asks_the_user_to_extend_a_spent_budget(home: Path, answer: dict[str, Any]) -> None:
    backend = ScriptedBackend(prices=PRICED)
    backend.enqueue(anchored_plan(PROBLEM.read_text()), role="plan")
    backend.enqueue(f"```python\n{source('cand_clamp')}```\n", role="code")
    backend.enqueue(f"```python\n{source('cand_clamp')}```\n", role="debug")
    async with tasks_client(make_server(home, backend_factory=lambda: backend)) as client:
        run_id = await new_run(client, budget=1)
        ok(await client.call_tool("add_child", {"run_id": run_id, "parent_id": "n0",
                                                "source": source("cand_wrong")}))
        handle = await started(client, "optimize", {"run_id": run_id})
        with anyio.fail_after(60):
            while (state := await get_task(client.session, handle.task_id)).status != "input_required":
                assert state.status == "working", state
                await anyio.sleep(FAST_POLL)
        assert state.input_requests is not None and list(state.input_requests) == ["extend-budget-1"]
        request = state.input_requests["extend-budget-1"]
        assert request["method"] == "elicitation/create" and request["params"]["mode"] == "form"
        assert "used its budget of 1" in request["params"]["message"]
        assert "used its budget" in (state.status_message or "")
        await update_task(client.session, handle.task_id, {"unknown-key": {"action": "accept"}})  # ignored
        await update_task(client.session, handle.task_id, {"extend-budget-1": answer})
        done = await settled(client, handle)
        result = ok(outcome(done))
        if answer["action"] == "accept":
            assert result["attempts"] == 1 and result["best_node_id"] == "n2", result
            assert "2/2 attempts" in (done.status_message or "")
        else:
            assert result["attempts"] == 0 and backend.requests == []
            assert "1/1 attempts" in (done.status_message or "")


async def test_eight_concurrent_add_child_tasks_on_a_budget_of_four_record_exactly_four(home: Path) -> None:
    async with tasks_client(make_server(home)) as client:
        run_id = await new_run(client, budget=4)
        names = ["cand_clamp", "cand_where", "cand_wrong", "cand_clamp"] * 2
        handles: list[CreateTaskResult] = []

        async def submit(name: str) -> None:
            handles.append(await started(client, "add_child", {"run_id": run_id, "parent_id": "n0",
                                                               "source": source(name)}))

        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(submit, name)
        assert len(handles) == 8
        states = [await settled(client, handle) for handle in handles]
        assert all(state.status == "completed" for state in states)
        recorded = [s for s in states if not (s.result or {}).get("isError")]
        refused = [s for s in states if (s.result or {}).get("isError")]
        assert len(recorded) == 4 and len(refused) == 4
        assert all("budget of 4" in (s.status_message or "") for s in refused)
        for state in recorded:  # recorded out of the budget, and the attempts still in flight
            assert re.fullmatch(r"n\d [a-z_]+(, [\d.]+x)?; [1-4]/4 attempts(, [1-3] in flight)?",
                                state.status_message or ""), state.status_message
        children = ok(await client.call_tool("get_node", {"run_id": run_id, "node_id": "n0"}))["children"]
        assert sorted(children) == ["n1", "n2", "n3", "n4"]
        assert sorted(ok(outcome(s))["node_id"] for s in recorded) == ["n1", "n2", "n3", "n4"]


async def test_only_a_tasks_client_is_told_to_pipeline_its_attempts(home: Path) -> None:
    async with tasks_client(make_server(home)) as client:
        run_id = await new_run(client, budget=2)
        arguments = {"run_id": run_id, "node_id": "n0", "role": "debug"}
        told = ok(await client.call_tool("build_context", arguments))
        assert "select_node and write the next attempt while this one builds" in told["next"]
        planned = ok(await client.call_tool("build_context", {**arguments, "role": "plan"}))
        assert "while this one builds" not in planned["next"]
    async with Client(make_server(home)) as plain:
        answer = ok(await plain.call_tool("build_context", arguments))
        assert "MCP tasks" not in answer["next"]


async def test_task_methods_need_the_extension_and_a_known_task(home: Path) -> None:
    async with Client(make_server(home)) as plain:
        with pytest.raises(MCPError) as missing:
            await get_task(plain.session, "whatever")
        assert missing.value.code == -32021
        assert "io.modelcontextprotocol/tasks" in str(missing.value.data)
    async with tasks_client(make_server(home)) as client:
        for call in (get_task, cancel_task):
            with pytest.raises(MCPError) as unknown:
                await call(client.session, "no-such-task")
            assert unknown.value.code == -32602 and "Task not found" in unknown.value.message
