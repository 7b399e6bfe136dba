"""The task manager over a real SQLite file: a dead server's tasks, TTLs, one settlement per task."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from mcp import MCPError

from stark_mcp.orchestrator.tasks import TaskOwner, TaskRecord
from stark_mcp.server.tasks.manager import TaskControl, TaskManager
from stark_mcp.store import Store
from stark_mcp.store.tasks import TaskTable

pytestmark = pytest.mark.anyio


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def row(task_id: str, owner: TaskOwner, *, status: str = "working", age_s: float = 0.0,
        ttl_ms: int | None = 60_000) -> TaskRecord:
    at = time.time() - age_s
    return TaskRecord(id=task_id, tool="add_child", arguments={"run_id": "r-x"}, status=status,
                      status_message="child of n0: build 3 s", owner=owner, ttl_ms=ttl_ms,
                      poll_interval_ms=2000, created_at=at, updated_at=at,
                      result={"content": [], "isError": False} if status == "completed" else None)


async def test_a_restarted_server_fails_only_a_dead_servers_tasks(tmp_path: Path) -> None:
    host = socket.gethostname()
    async with await Store.open(tmp_path / "stark.db") as store:
        table = TaskTable(store)
        await table.insert(row("dead", TaskOwner(host=host, pid=dead_pid(), boot="a")))
        await table.insert(row("alive", TaskOwner(host=host, pid=1, boot="b")))  # pid 1 lives
        await table.insert(row("elsewhere", TaskOwner(host="other-host", pid=dead_pid(), boot="c")))
        await table.insert(row("old", TaskOwner(host=host, pid=1, boot="d"), status="completed", age_s=120))
        manager = TaskManager(table)
        assert await manager.start() == ["dead"]
        lost = await manager.get("dead")
        assert lost.status == "failed" and lost.error is not None
        assert "stopped before it finished" in lost.error["message"]
        assert "while it was child of n0: build 3 s" in (lost.status_message or "")
        assert (await manager.get("alive")).status == "working"
        assert (await manager.get("elsewhere")).status == "working"
        with pytest.raises(MCPError, match="Task not found"):  # past its TTL: purged at start
            await manager.get("old")


async def test_an_expired_task_is_reported_as_expired_and_a_settled_row_stays_settled(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "stark.db") as store:
        table = TaskTable(store)
        owner = TaskOwner(host=socket.gethostname(), pid=1, boot="x")
        await table.insert(row("done", owner, status="completed", age_s=120))
        manager = TaskManager(table)
        with pytest.raises(MCPError, match="Task has expired"):
            await manager.get("done")
        settled = await table.get("done")
        assert not await table.save(settled.model_copy(update={"status": "failed"}))  # a task settles once
        assert (await table.get("done")).status == "completed"


async def test_a_task_reports_its_phase_and_settles_once(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "stark.db") as store:
        manager = TaskManager(TaskTable(store), ttl_ms=1000, poll_ms=50)
        release = anyio.Event()

        async def work(control: TaskControl) -> dict[str, object]:
            control.phase("building")
            await release.wait()
            return {"content": [], "isError": False}

        handle = await manager.create("evaluate_kernel", {}, "evaluate r-x", work)
        assert handle.ttl_ms == 1000 and handle.poll_interval_ms == 50
        await anyio.sleep(0.05)
        working = await manager.get(handle.task_id)
        assert working.status == "working" and working.status_message.startswith("evaluate r-x: building ")
        release.set()
        with anyio.fail_after(10):
            while (state := await manager.get(handle.task_id)).status == "working":
                await anyio.sleep(0.02)
        assert state.status == "completed" and state.result == {"content": [], "isError": False}
        await manager.cancel(handle.task_id)  # too late: acknowledged, nothing changes
        assert (await manager.get(handle.task_id)).status == "completed"
        await manager.aclose()
