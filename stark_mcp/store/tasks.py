"""The durable half of MCP tasks: one row per task handle, in the run store's SQLite file.

A task is written before its handle is returned (SEP-2663: a handle is only given out once
``tasks/get`` resolves it) and on every change of status; its status message is written at a
bounded rate by the process running it. Another process sharing the file reads the same rows,
and a restarted server finds what its predecessor left.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from stark_mcp.store.connection import run_write
from stark_mcp.store.errors import NotFound
from stark_mcp.store.store import Store

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


class TaskOwner(BaseModel):
    """The process running a task: a restarted server fails only the tasks of a dead owner."""

    host: str
    pid: int
    boot: str = Field(description="random per TaskManager, so a reused pid is not mistaken for the owner")


class TaskRecord(BaseModel):
    id: str
    tool: str
    arguments: dict[str, Any]
    run_id: str | None = None
    status: TaskStatus
    status_message: str | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    owner: TaskOwner
    ttl_ms: int | None
    poll_interval_ms: int
    created_at: float
    updated_at: float

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def expired(self, now: float) -> bool:
        return self.ttl_ms is not None and now > self.created_at + self.ttl_ms / 1000


_COLUMNS = (
    "id, tool, arguments_json, run_id, status, status_message, input_requests_json, result_json,"
    " error_json, owner_json, ttl_ms, poll_interval_ms, created_at, updated_at"
)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _columns(task: TaskRecord) -> dict[str, Any]:
    return {
        "id": task.id, "tool": task.tool, "arguments_json": json.dumps(task.arguments), "run_id": task.run_id,
        "status": task.status, "status_message": task.status_message,
        "input_requests_json": _dump(task.input_requests), "result_json": _dump(task.result),
        "error_json": _dump(task.error), "owner_json": task.owner.model_dump_json(), "ttl_ms": task.ttl_ms,
        "poll_interval_ms": task.poll_interval_ms, "created_at": task.created_at,
        "updated_at": task.updated_at,
    }


def _record(row: Sequence[Any]) -> TaskRecord:
    (task_id, tool, arguments, run_id, status, message, requests, result, error, owner, ttl, poll,
     created, updated) = row  # fmt: skip
    return TaskRecord(
        id=task_id, tool=tool, arguments=json.loads(arguments), run_id=run_id, status=status,
        status_message=message, input_requests=json.loads(requests) if requests else None,
        result=json.loads(result) if result else None, error=json.loads(error) if error else None,
        owner=TaskOwner.model_validate_json(owner), ttl_ms=ttl, poll_interval_ms=poll,
        created_at=created, updated_at=updated,
    )


class TaskTable:
    """Reads and writes of the ``tasks`` table through a ``Store``'s connection and lock.

    Every write is one committed transaction, safe under cancellation (``run_write``).
    """

    def __init__(self, store: Store) -> None:
        self._conn = store._conn  # noqa: SLF001 - one connection and one lock per database file
        self._lock = store._lock  # noqa: SLF001

    async def insert(self, task: TaskRecord) -> None:
        columns = _columns(task)
        names = ", ".join(columns)
        marks = ", ".join(f":{name}" for name in columns)

        async def work() -> None:
            await self._conn.execute(f"INSERT INTO tasks ({names}) VALUES ({marks})", columns)

        await run_write(self._conn, self._lock, work)

    async def save(self, task: TaskRecord, *, unless_terminal: bool = True) -> bool:
        """Write ``task`` over its row; with ``unless_terminal`` a row already terminal is kept
        (a task settles once). Returns whether the row was written."""
        columns = _columns(task)
        sets = ", ".join(f"{name} = :{name}" for name in columns if name != "id")
        guard = " AND status NOT IN ('completed', 'failed', 'cancelled')" if unless_terminal else ""

        async def work() -> bool:
            cursor = await self._conn.execute(f"UPDATE tasks SET {sets} WHERE id = :id{guard}", columns)
            return cursor.rowcount == 1

        return await run_write(self._conn, self._lock, work)

    async def get(self, task_id: str) -> TaskRecord:
        sql = f"SELECT {_COLUMNS} FROM tasks WHERE id = ?"
        async with self._lock, self._conn.execute(sql, (task_id,)) as cur:
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no task {task_id!r}")
        return _record(row)

    async def unfinished(self) -> list[TaskRecord]:
        sql = f"SELECT {_COLUMNS} FROM tasks WHERE status IN ('working', 'input_required')"
        sql += " ORDER BY created_at"
        async with self._lock, self._conn.execute(sql) as cur:
            return [_record(row) for row in await cur.fetchall()]

    async def purge_expired(self, now: float | None = None) -> int:
        """Delete the settled tasks whose time to live has passed; returns how many."""
        at = time.time() if now is None else now

        async def work() -> int:
            cursor = await self._conn.execute(
                "DELETE FROM tasks WHERE ttl_ms IS NOT NULL AND created_at + ttl_ms / 1000.0 < ?"
                " AND status IN ('completed', 'failed', 'cancelled')",
                (at,),
            )
            return cursor.rowcount

        return await run_write(self._conn, self._lock, work)
