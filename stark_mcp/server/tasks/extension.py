"""The Tasks extension on the server: which tool calls become tasks, and the three ``tasks/*`` methods.

A ``tools/call`` of a long tool becomes a task only when the request itself declares
``io.modelcontextprotocol/tasks`` in its capabilities on a 2026-07-28 connection; every other call
(another tool, a client without the extension, a 2025-era connection) goes through unchanged, so
those clients get today's blocking call with progress notifications, byte for byte.
"""

from __future__ import annotations

from typing import Any

from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp_types import CallToolRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from stark_mcp.server.tasks.manager import TaskControl, TaskManager
from stark_mcp.server.tasks.wire import (
    TASKS_EXTENSION,
    EmptyTaskResult,
    TaskIdParams,
    UpdateTaskParams,
)

# The tools that build, run or time code, or call an LLM: each can take from seconds to minutes.
LONG_TOOLS: frozenset[str] = frozenset({
    "create_run", "evaluate_kernel", "add_child", "profile_kernel", "optimize", "create_problem",
})


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The request declared the extension (per-request capabilities, 2026-07-28 only: a claimed
    ``resultType`` cannot travel on a 2025-era wire)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities is not None else None
    return bool(declared) and TASKS_EXTENSION in declared


def _label(tool: str, arguments: dict[str, Any]) -> str:
    """How a person reads the task's subject in its status messages."""
    if tool == "add_child":
        return f"child of {arguments.get('parent_id', '?')}"
    if tool == "profile_kernel":
        return f"profile of {arguments.get('node_id', '?')}"
    if tool in ("evaluate_kernel", "optimize"):
        return f"{tool.replace('_kernel', '')} {arguments.get('run_id', '?')}"
    return tool.replace("_", " ")


def _manager(ctx: ServerRequestContext[Any, Any]) -> TaskManager:
    manager = getattr(ctx.lifespan_context, "tasks", None)
    if not isinstance(manager, TaskManager):
        raise MCPError(code=-32603, message="this server has no task manager open")
    return manager


class TasksExtension(Extension):
    """SEP-2663 tasks for stark-mcp's long tools."""

    identifier = TASKS_EXTENSION

    def __init__(self, long_tools: frozenset[str] = LONG_TOOLS) -> None:
        self.long_tools = long_tools

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self._get, MODERN_PROTOCOL_VERSIONS),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, MODERN_PROTOCOL_VERSIONS),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel, MODERN_PROTOCOL_VERSIONS),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if params.name not in self.long_tools or not declares_tasks(ctx):
            return await call_next(ctx)
        manager = _manager(ctx)
        arguments = dict(params.arguments or {})

        async def work(_control: TaskControl) -> dict[str, Any]:
            # Runs in the task's own asyncio task with CURRENT_TASK set, so the core's progress
            # becomes the task's status message (progress_relay) instead of notifications to a
            # request that has already been answered.
            result = await call_next(ctx)
            if result is None:
                return {}
            if isinstance(result, dict):
                return result
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)

        run_id = arguments.get("run_id")
        handle = await manager.create(
            params.name, arguments, _label(params.name, arguments), work,
            run_id=run_id if isinstance(run_id, str) else None,
        )
        return handle.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        require_client_extension(ctx, TASKS_EXTENSION)
        found = await _manager(ctx).get(params.task_id)
        return found.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> HandlerResult:
        require_client_extension(ctx, TASKS_EXTENSION)
        await _manager(ctx).update(params.task_id, params.input_responses)
        return EmptyTaskResult().model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        require_client_extension(ctx, TASKS_EXTENSION)
        await _manager(ctx).cancel(params.task_id)
        return EmptyTaskResult().model_dump(by_alias=True, mode="json", exclude_none=True)
