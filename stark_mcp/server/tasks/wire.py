"""Wire shapes of the Tasks extension (SEP-2663, ``io.modelcontextprotocol/tasks``), both sides.

Written from the 2026-07-28 extension text (repository modelcontextprotocol/experimental-ext-tasks,
``specification/draft/tasks.md``), not from ``mcp-types``' task models, which follow the older
2025-11-25 draft (``tasks/result``, ``tasks/list``) and do not interoperate with it.
"""

from __future__ import annotations

from typing import Any, Literal

from mcp_types import Request, RequestParams, Result
from mcp_types._types import MCPModel
from pydantic import Field

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

WireStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


class TaskIdParams(RequestParams):
    """Params of ``tasks/get`` and ``tasks/cancel``."""

    task_id: str


class UpdateTaskParams(TaskIdParams):
    """Params of ``tasks/update``: answers to the task's outstanding ``inputRequests``, by key."""

    input_responses: dict[str, Any] = Field(default_factory=dict)


class TaskFields(MCPModel):
    """The ``Task`` shape every task message carries."""

    task_id: str
    status: WireStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class CreateTaskResult(Result, TaskFields):
    """What ``tools/call`` answers instead of a ``CallToolResult`` when the work became a task."""

    result_type: Literal["task"] = "task"


class GetTaskResult(Result, TaskFields):
    """``tasks/get``: the task with, by status, its ``result``, ``error`` or ``inputRequests``."""

    result_type: Literal["complete"] = "complete"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class EmptyTaskResult(Result):
    """The acknowledgement of ``tasks/update`` and ``tasks/cancel``."""

    result_type: Literal["complete"] = "complete"


class GetTaskRequest(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # the client mirrors it into Mcp-Name, so a balancer routes by task


class CancelTaskRequest(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


def requires_tasks_data() -> dict[str, Any]:
    """``data`` of a -32021 error: the client must declare the extension."""
    return {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


__all__ = [
    "TASKS_EXTENSION", "CancelTaskRequest", "CreateTaskResult", "EmptyTaskResult", "GetTaskRequest",
    "GetTaskResult", "TaskFields", "TaskIdParams", "UpdateTaskParams", "UpdateTaskRequest", "WireStatus",
    "requires_tasks_data",
]
