"""Run tool calls as durable tasks on the server's event loop: create, poll, answer, cancel.

Each task is an ``asyncio.Task`` on the loop that serves the requests (never a worker thread,
which a cancel could not stop), and a row in the store written before its handle is handed out.
The live state (status, the phase the core last reported, questions waiting for an answer) is
kept here and flushed to the row at a bounded rate; a task of another process, or one left by a
server that died, is answered from its row. ``TaskControl`` is what the running tool sees: a
place to report its phase and a way to ask the host's user a question (``input_required``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcp import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from stark_mcp.orchestrator.tasks import NotFound, TaskOwner, TaskRecord, TaskStore
from stark_mcp.server.tasks.wire import CreateTaskResult, GetTaskResult

log = logging.getLogger(__name__)

DEFAULT_TTL_MS = 24 * 3600 * 1000  # a finished task's result is kept a day
DEFAULT_POLL_MS = 2000
FLUSH_EVERY_S = 1.0  # how often a running task's status message reaches the store

Work = Callable[["TaskControl"], Awaitable[dict[str, Any]]]
Summarize = Callable[[TaskRecord], Awaitable[str]]


class InputDeclined(Exception):
    """The host's user declined or cancelled a question the task asked."""


@dataclass
class TaskControl:
    """The running tool's side of its task: report the current phase, ask the user."""

    manager: TaskManager
    task_id: str
    label: str

    def phase(self, message: str) -> None:
        self.manager.set_phase(self.task_id, message)

    async def ask(self, key: str, request: dict[str, Any]) -> dict[str, Any]:
        """Put the task in ``input_required`` with ``request`` (an ``elicitation/create`` request
        object) under a key unique for the task's life; returns the client's answer once a
        ``tasks/update`` brings it."""
        return await self.manager.ask(self.task_id, key, request)


CURRENT_TASK: contextvars.ContextVar[TaskControl | None] = contextvars.ContextVar("stark_task", default=None)


def current_task() -> TaskControl | None:
    """The task the calling code runs in, if any (a tool called without the extension has none)."""
    return CURRENT_TASK.get()


@dataclass
class _Live:
    record: TaskRecord
    started: float
    label: str
    phase: str = "started"
    runner: asyncio.Task[None] | None = None
    questions: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    asked: set[str] = field(default_factory=set)
    flushed_at: float = 0.0


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def process_alive(owner: TaskOwner) -> bool:
    if owner.host != socket.gethostname():
        return True  # another machine's process: not ours to judge
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class TaskManager:
    """The tasks of one server process, over the shared task table."""

    def __init__(
        self, table: TaskStore, *, ttl_ms: int | None = DEFAULT_TTL_MS, poll_ms: int = DEFAULT_POLL_MS,
        summarize: Summarize | None = None,
    ) -> None:
        self._table = table
        self.ttl_ms = ttl_ms
        self.poll_ms = poll_ms
        self._summarize = summarize
        self.owner = TaskOwner(host=socket.gethostname(), pid=os.getpid(), boot=secrets.token_hex(8))
        self._live: dict[str, _Live] = {}

    # ---- lifetime ---------------------------------------------------------------------------

    async def start(self) -> list[str]:
        """Fail the unfinished tasks whose process is gone (a server killed mid-task), purge
        expired ones; returns the ids failed."""
        failed = []
        for record in await self._table.unfinished():
            if record.owner.boot == self.owner.boot or process_alive(record.owner):
                continue
            reason = (
                f"the stark-mcp server running this task (pid {record.owner.pid}) stopped before it "
                f"finished, while it was {record.status_message or record.status}"
            )
            error = {"code": INTERNAL_ERROR, "message": reason}
            await self._settle_row(record, "failed", reason, error=error)
            failed.append(record.id)
        await self._table.purge_expired()
        return failed

    async def aclose(self) -> None:
        """Stop this process's tasks; each is recorded as failed with the reason (shutdown)."""
        running = [live for live in self._live.values() if live.runner is not None and not live.runner.done()]
        runners = [live.runner for live in running if live.runner is not None]
        for live in running:
            if live.runner is not None:
                live.record.status_message = f"{live.label}: stopped with the server while {live.phase}"
                live.phase = "__shutdown__"
                live.runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)

    # ---- the protocol's verbs ---------------------------------------------------------------

    async def create(self, tool: str, arguments: dict[str, Any], label: str, work: Work,
                     *, run_id: str | None = None) -> CreateTaskResult:
        """Record the task, then start it; the handle comes back only once the row is committed."""
        now = time.time()
        record = TaskRecord(
            id=secrets.token_urlsafe(18), tool=tool, arguments=arguments, run_id=run_id, status="working",
            status_message=f"{label}: started", owner=self.owner, ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_ms, created_at=now, updated_at=now,
        )
        await self._table.insert(record)
        live = _Live(record=record, started=time.monotonic(), label=label, flushed_at=now)
        self._live[record.id] = live
        control = TaskControl(self, record.id, label)
        context = contextvars.copy_context()
        context.run(CURRENT_TASK.set, control)
        live.runner = asyncio.get_running_loop().create_task(
            self._run(live, work, control), name=f"mcp-task-{tool}-{record.id[:8]}", context=context
        )
        return CreateTaskResult(**self._fields(live.record, live))

    async def get(self, task_id: str) -> GetTaskResult:
        live = self._live.get(task_id)
        record = live.record if live is not None else await self._stored(task_id)
        fields = self._fields(record, live)
        extra: dict[str, Any] = {}
        if record.status == "completed":
            extra["result"] = record.result
        elif record.status == "failed":
            extra["error"] = record.error
        elif record.status == "input_required":
            extra["input_requests"] = record.input_requests
        return GetTaskResult(**fields, **extra)

    async def update(self, task_id: str, responses: dict[str, Any]) -> None:
        live = self._live.get(task_id)
        if live is None:
            await self._stored(task_id)  # unknown ids get the protocol's error; others are ignored
            return
        for key, answer in responses.items():
            future = live.questions.get(key)
            if future is not None and not future.done():  # unknown or answered keys are ignored
                future.set_result(answer if isinstance(answer, dict) else {"action": "cancel"})

    async def cancel(self, task_id: str) -> None:
        live = self._live.get(task_id)
        if live is None:
            await self._stored(task_id)
            return  # settled, or another process's: acknowledged, nothing to stop here
        if live.runner is not None and not live.runner.done():
            live.runner.cancel()

    # ---- what the running tool reports ------------------------------------------------------

    def set_phase(self, task_id: str, message: str) -> None:
        live = self._live.get(task_id)
        if live is None or live.record.terminal:
            return
        live.phase = message
        live.record.status_message = self._working_message(live)
        now = time.time()
        if now - live.flushed_at >= FLUSH_EVERY_S:
            live.flushed_at = now
            live.record.updated_at = now
            task = asyncio.get_running_loop().create_task(self._table.save(live.record.model_copy()))
            task.add_done_callback(_quiet)

    async def ask(self, task_id: str, key: str, request: dict[str, Any]) -> dict[str, Any]:
        live = self._live[task_id]
        if key in live.asked:
            raise ValueError(f"input request key {key!r} was already used in task {task_id}")
        live.asked.add(key)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        live.questions[key] = future
        message = request.get("params", {}).get("message", "waiting for your answer")
        await self._transition(
            live, "input_required", f"{live.label}: {message}", input_requests={key: request}
        )
        try:
            return await future
        finally:
            live.questions.pop(key, None)
            if not live.record.terminal:
                await self._transition(live, "working", self._working_message(live), input_requests=None)

    # ---- internals --------------------------------------------------------------------------

    async def _run(self, live: _Live, work: Work, control: TaskControl) -> None:
        try:
            result = await work(control)
        except asyncio.CancelledError:
            shutdown = live.phase == "__shutdown__"
            if shutdown:
                reason = live.record.status_message or "stopped with the server"
                await asyncio.shield(self._settle(live, "failed", reason, error={
                    "code": INTERNAL_ERROR, "message": reason,
                }))
            else:
                message = f"{live.label}: cancelled while {live.phase}"
                await asyncio.shield(self._settle(live, "cancelled", message))
            raise
        except MCPError as exc:
            error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
            await self._settle(live, "failed", f"{live.label}: failed: {exc.error.message}", error=error)
        except Exception as exc:  # noqa: BLE001 - a task's failure is reported through tasks/get
            log.exception("task %s (%s) failed", live.record.id, live.record.tool)
            message = f"{type(exc).__name__}: {exc}"
            await self._settle(live, "failed", f"{live.label}: failed: {message}",
                               error={"code": INTERNAL_ERROR, "message": message})
        else:
            live.record.result = result
            summary = await self._summary(live, result)
            await self._settle(live, "completed", summary)
        finally:
            for future in live.questions.values():
                future.cancel()
            # Settled: polls are answered from the row from now on, like any other process's.
            self._live.pop(live.record.id, None)

    async def _summary(self, live: _Live, result: dict[str, Any]) -> str:
        if self._summarize is not None:
            probe = live.record.model_copy(update={"result": result, "status": "completed"})
            try:
                return await self._summarize(probe)
            except Exception:  # noqa: BLE001 - a summary never fails a finished task
                log.exception("summarizing task %s failed", live.record.id)
        return f"{live.label}: done in {time.monotonic() - live.started:.0f} s"

    async def _settle(
        self, live: _Live, status: str, message: str, *, error: dict[str, Any] | None = None
    ) -> None:
        live.record = live.record.model_copy(update={
            "status": status, "status_message": message, "error": error, "input_requests": None,
            "updated_at": time.time(),
        })
        await self._table.save(live.record)

    async def _settle_row(
        self, record: TaskRecord, status: str, message: str, *, error: dict[str, Any]
    ) -> None:
        settled = record.model_copy(update={
            "status": status, "status_message": message, "error": error, "input_requests": None,
            "updated_at": time.time(),
        })
        await self._table.save(settled)

    async def _transition(self, live: _Live, status: str, message: str, *,
                          input_requests: dict[str, Any] | None) -> None:
        live.record = live.record.model_copy(update={
            "status": status, "status_message": message, "input_requests": input_requests,
            "updated_at": time.time(),
        })
        live.flushed_at = live.record.updated_at
        await asyncio.shield(self._table.save(live.record))

    def _working_message(self, live: _Live) -> str:
        return f"{live.label}: {live.phase} {time.monotonic() - live.started:.0f} s"

    async def _stored(self, task_id: str) -> TaskRecord:
        try:
            record = await self._table.get(task_id)
        except NotFound:
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found") from None
        if record.terminal and record.expired(time.time()):
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task has expired")
        return record

    def _fields(self, record: TaskRecord, live: _Live | None) -> dict[str, Any]:
        message = record.status_message
        if live is not None and record.status == "working":
            message = self._working_message(live)  # the elapsed time, fresh at every poll
        return {
            "task_id": record.id, "status": record.status, "status_message": message,
            "created_at": iso(record.created_at), "last_updated_at": iso(record.updated_at),
            "ttl_ms": record.ttl_ms, "poll_interval_ms": record.poll_interval_ms,
        }


def _quiet(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("writing a task's status failed: %s", task.exception())
