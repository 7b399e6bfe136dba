"""What every handler reaches through its context: the RunService, the settings and the LLM factory.

The store and the evaluator are opened when the first session starts and closed
when the last one ends, so all clients of one server process share one RunService
(and its per-run locks). Resources such as the aiosqlite connection belong to an
event loop, hence one share per loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import cast

from mcp.server.mcpserver import Context

from stark_mcp.config import Settings
from stark_mcp.llm import LLMBackend
from stark_mcp.orchestrator.owners import close_session, open_session
from stark_mcp.orchestrator.roots import AllowedRoots
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.records import RunOwner
from stark_mcp.server.tasks.manager import TaskManager

BackendFactory = Callable[[], LLMBackend]


@dataclass
class AppState:
    service: RunService
    settings: Settings
    backend_factory: BackendFactory
    roots: AllowedRoots  # where clients' path arguments must resolve
    # This connection's claim on the runs it makes run (a lifespan is one connection over stdio and
    # in process; over HTTP one for all sessions, released when the server stops).
    owner: RunOwner | None = None
    tasks: TaskManager | None = None  # the SEP-2663 tasks of this process (server/tasks/)


@dataclass
class _LoopState:
    """The state open on one event loop and how many sessions use it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    state: AppState | None = None
    stack: AsyncExitStack | None = None


class SharedState:
    """Reference-counted ``AppState``: opened by the first lifespan, closed by the last."""

    def __init__(self, opener: Callable[[AsyncExitStack], Awaitable[AppState]]) -> None:
        self._opener = opener
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[AppState]:
        opened = self._by_loop.setdefault(asyncio.get_running_loop(), _LoopState())
        async with opened.lock:
            if opened.users == 0:
                stack = AsyncExitStack()
                try:
                    opened.state = await self._opener(stack)
                except BaseException:
                    await stack.aclose()
                    raise
                opened.stack = stack
            opened.users += 1
        assert opened.state is not None
        try:
            yield opened.state
        finally:
            async with opened.lock:
                opened.users -= 1
                if opened.users == 0 and opened.stack is not None:
                    stack, opened.stack, opened.state = opened.stack, None, None
                    await stack.aclose()

    def current(self) -> AppState:
        """The state open on the running loop, for handlers the SDK gives no context (static resources)."""
        opened = self._by_loop.get(asyncio.get_running_loop())
        if opened is None or opened.state is None:
            raise RuntimeError("no stark-mcp session is open on this event loop")
        return opened.state


def app_state(ctx: Context) -> AppState:
    return cast(AppState, ctx.request_context.lifespan_context)


_OWNER_KEY = "stark_mcp.run_owner"


def run_owner(ctx: Context) -> RunOwner | None:
    """Who the runs this request makes run belong to. Over stdio and in process, the connection's
    lifespan (``AppState.owner``). Over streamable HTTP the lifespan is the server's, so a stateful
    session (one with an id) gets an owner of its own at its first use, released (its running
    runs marked 'interrupted') when the session ends: the client's DELETE, the idle timeout, a crash.
    """
    state = app_state(ctx)
    # The SDK's per-request session proxy holds its connection privately; the connection's
    # ``state`` and ``exit_stack`` are its documented per-connection scratch space and teardown.
    connection = getattr(ctx.request_context.session, "_connection", None)
    if getattr(connection, "session_id", None) is None or not hasattr(connection, "exit_stack"):
        return state.owner
    assert connection is not None
    owner = connection.state.get(_OWNER_KEY)
    if owner is None:
        owner = connection.state[_OWNER_KEY] = open_session()
        service = state.service

        async def release() -> None:
            close_session(owner)
            await service.release_session(owner)

        connection.exit_stack.push_async_callback(release)
    return cast(RunOwner, owner)
