"""The client's side of the Tasks extension, for the SDK's ``mcp.Client`` (which has none built in).

``Client(server, extensions=[TasksClient()])`` declares ``io.modelcontextprotocol/tasks`` on every
request; ``client.call_tool`` then polls a task handle to its end and returns the tool's result as
if the call had blocked. To hold the handle yourself (keep several attempts in flight), call
``client.session.call_tool(..., allow_claimed=True)`` and use ``get_task`` / ``cancel_task`` /
``update_task``. The tests and ``tools/bench_tasks.py`` drive the server through this.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import MCPError
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.types import CallToolResult

from stark_mcp.server.tasks.wire import (
    TASKS_EXTENSION,
    CancelTaskRequest,
    CreateTaskResult,
    EmptyTaskResult,
    GetTaskRequest,
    GetTaskResult,
    TaskIdParams,
    UpdateTaskParams,
    UpdateTaskRequest,
)

AnswerInput = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
TERMINAL = frozenset({"completed", "failed", "cancelled"})


class TaskCancelled(Exception):
    """The task ended cancelled."""


async def get_task(session: ClientSession, task_id: str) -> GetTaskResult:
    return await session.send_request(GetTaskRequest(params=TaskIdParams(task_id=task_id)), GetTaskResult)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTaskRequest(params=TaskIdParams(task_id=task_id)), EmptyTaskResult)


async def update_task(session: ClientSession, task_id: str, responses: dict[str, Any]) -> None:
    request = UpdateTaskRequest(params=UpdateTaskParams(task_id=task_id, input_responses=responses))
    await session.send_request(request, EmptyTaskResult)


async def start_tool(
    session: ClientSession, name: str, arguments: dict[str, Any]
) -> CreateTaskResult | CallToolResult:
    """Call a tool and return at once: its task handle, or its result if the server answered inline."""
    result = await session.call_tool(name, arguments, allow_claimed=True)
    if isinstance(result, CreateTaskResult | CallToolResult):
        return result
    raise TypeError(f"unexpected result for {name}: {type(result).__name__}")


async def wait_task(
    session: ClientSession, task_id: str, *, answer: AnswerInput | None = None, poll_floor_s: float = 0.02,
    poll_cap_s: float | None = None,
) -> GetTaskResult:
    """Poll ``tasks/get`` (at the server's ``pollIntervalMs``, capped by ``poll_cap_s``) until the task
    settles; questions (``input_required``) go to ``answer`` once per key. Returns the last state."""
    answered: set[str] = set()
    while True:
        state = await get_task(session, task_id)
        if state.status in TERMINAL:
            return state
        if state.status == "input_required" and state.input_requests:
            fresh = {k: v for k, v in state.input_requests.items() if k not in answered}
            if fresh:
                if answer is None:
                    raise RuntimeError(f"task {task_id} asks for input and nobody answers: {fresh}")
                responses = {key: await answer(request) for key, request in fresh.items()}
                answered.update(responses)
                await update_task(session, task_id, responses)
                continue
        interval = (state.poll_interval_ms or 1000) / 1000
        if poll_cap_s is not None:
            interval = min(interval, poll_cap_s)
        await anyio.sleep(max(poll_floor_s, interval))


def outcome(state: GetTaskResult) -> CallToolResult:
    """The tool's result from a settled task; a failed task raises its JSON-RPC error."""
    if state.status == "completed" and state.result is not None:
        return CallToolResult.model_validate(state.result, by_name=False)
    if state.status == "failed":
        error = state.error or {}
        raise MCPError(code=int(error.get("code", -32603)), message=str(error.get("message", "")),
                       data=error.get("data"))
    raise TaskCancelled(state.status_message or f"task {state.task_id} was cancelled")


class TasksClient(ClientExtension):
    """Declare the extension and finish task handles transparently inside ``Client.call_tool``."""

    identifier = TASKS_EXTENSION

    def __init__(self, *, answer: AnswerInput | None = None, poll_cap_s: float | None = None) -> None:
        self._answer = answer
        self._poll_cap_s = poll_cap_s

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    async def _resolve(self, handle: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        state = await wait_task(ctx.session, handle.task_id, answer=self._answer, poll_cap_s=self._poll_cap_s)
        return outcome(state)
