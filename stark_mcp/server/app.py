"""Build the MCP server: the lifespan that owns the store and the evaluator, plus the handlers.

``build_server`` is the one entry point: ``stark-mcp serve`` runs what it returns over stdio
or HTTP, and tests drive it in process with ``mcp.Client(server)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from mcp.server.mcpserver import MCPServer

from stark_mcp.config import Settings
from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.llm import backend_from_settings
from stark_mcp.orchestrator.service import RunService
from stark_mcp.server.instructions import INSTRUCTIONS
from stark_mcp.server.profile_tools import register_profile_tools
from stark_mcp.server.prompts import register_prompts
from stark_mcp.server.resources import register_resources
from stark_mcp.server.state import AppState, BackendFactory, SharedState
from stark_mcp.server.tools import register_tools
from stark_mcp.store import Store

SERVER_NAME = "stark-mcp"


def build_server(
    settings: Settings | None = None,
    *,
    evaluator: Evaluator | None = None,
    eval_settings: EvalSettings | None = None,
    store_path: Path | str | None = None,
    backend_factory: BackendFactory | None = None,
) -> MCPServer[AppState]:
    """The stark-mcp MCP server.

    ``settings`` default to ``Settings.from_env()``; the store lives at ``store_path`` or
    ``settings.database``; the evaluator is ``evaluator`` or a new one on ``settings.cache``
    with ``eval_settings``; ``backend_factory`` makes the LLM backend for ``optimize``
    (default: from ``STARK_LLM`` / ``ANTHROPIC_API_KEY``).
    """
    resolved = settings or Settings.from_env()
    database = Path(store_path) if store_path is not None else resolved.database
    make_backend = backend_factory or backend_from_settings

    async def open_state(stack: AsyncExitStack) -> AppState:
        store = await stack.enter_async_context(await Store.open(database))
        chosen = evaluator or Evaluator(resolved.cache, eval_settings)
        await stack.enter_async_context(chosen)
        return AppState(service=RunService(store, chosen), backend_factory=make_backend)

    shared = SharedState(open_state)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[AppState]) -> AsyncIterator[AppState]:
        async with shared.acquire() as state:
            yield state

    server: MCPServer[AppState] = MCPServer(
        SERVER_NAME, instructions=INSTRUCTIONS, version=_version(), lifespan=lifespan,
        log_level="WARNING",
    )
    register_tools(server)
    register_profile_tools(server)
    register_prompts(server)
    register_resources(server, shared)
    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stark-mcp")
    except PackageNotFoundError:
        return "0"
