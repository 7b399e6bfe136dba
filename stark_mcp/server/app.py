"""Build the MCP server: the lifespan that opens the RunService, plus the handlers.

``build_server`` is the one entry point: ``stark-mcp serve`` runs what it returns over stdio
or HTTP, and tests drive it in process with ``mcp.Client(server)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

from stark_mcp import __version__
from stark_mcp.config import Settings
from stark_mcp.llm import LLMBackend, backend_from_settings
from stark_mcp.orchestrator.owners import close_session, open_session
from stark_mcp.orchestrator.roots import AllowedRoots
from stark_mcp.orchestrator.session import EvalSettings, open_service
from stark_mcp.server.instructions import INSTRUCTIONS
from stark_mcp.server.own_module import register_own_module
from stark_mcp.server.profile_tools import register_profile_tools
from stark_mcp.server.prompts import register_prompts
from stark_mcp.server.report_resource import register_report_resource
from stark_mcp.server.resources import register_resources
from stark_mcp.server.state import AppState, BackendFactory, SharedState
from stark_mcp.server.tasks.extension import TasksExtension
from stark_mcp.server.tasks.manager import TaskManager
from stark_mcp.server.tasks.summary import summarizer
from stark_mcp.server.tools import register_tools

SERVER_NAME = "stark-mcp"


def build_server(
    settings: Settings | None = None,
    *,
    eval_settings: EvalSettings | None = None,
    backend_factory: BackendFactory | None = None,
    roots: Sequence[str | Path] = (),
    problem_sources: bool = False,
) -> MCPServer[AppState]:
    """The stark-mcp MCP server.

    ``settings`` default to ``Settings.from_env()`` (read here, once); the store, the evaluator
    and the prompt templates are the ones they name, the evaluator using ``eval_settings``;
    ``backend_factory`` makes the LLM backend for ``optimize`` (default: from the settings).
    Every path a client passes must resolve inside the working folder, as it is now, or one of
    ``roots`` (``serve --root``); InvalidInput if one of them is not a folder. ``problem_sources``
    (``serve --allow-problem-source``): accept a problem given as text even where the evaluator's
    isolation level does not wall its code off from the server's user (``AllowedRoots``).
    """
    resolved = settings or Settings.from_env()
    allowed = AllowedRoots.of(roots, problem_sources=problem_sources)

    def default_backend() -> LLMBackend:
        return backend_from_settings(resolved)

    make_backend = backend_factory or default_backend

    async def open_state(stack: AsyncExitStack) -> AppState:
        service = await stack.enter_async_context(open_service(resolved, eval_settings))
        tasks = TaskManager(service.task_store(), summarize=summarizer(service.budget, service.attempts))
        await tasks.start()
        stack.push_async_callback(tasks.aclose)  # closed before the service its tasks use
        return AppState(
            service=service, settings=resolved, backend_factory=make_backend, roots=allowed, tasks=tasks
        )

    shared = SharedState(open_state)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[AppState]) -> AsyncIterator[AppState]:
        async with shared.acquire() as state:
            owner = open_session()
            try:
                yield replace(state, owner=owner)
            finally:
                # The client hung up (or the server stops): the runs this connection left running
                # are nobody's now.
                close_session(owner)
                with anyio.CancelScope(shield=True):
                    await state.service.release_session(owner)

    server: MCPServer[AppState] = MCPServer(
        SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, lifespan=lifespan,
        log_level=resolved.log_level, extensions=[TasksExtension()],
    )
    register_tools(server)
    register_own_module(server)
    register_profile_tools(server)
    register_prompts(server)
    register_resources(server, shared)
    register_report_resource(server)
    return server
