"""What every handler reaches through its context: the RunService and the LLM factory.

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

from stark_mcp.llm import LLMBackend
from stark_mcp.orchestrator.run_service import RunService

BackendFactory = Callable[[], LLMBackend]


@dataclass
class AppState:
    service: RunService
    backend_factory: BackendFactory


@dataclass
class _Share:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    state: AppState | None = None
    stack: AsyncExitStack | None = None


class SharedState:
    """Reference-counted ``AppState``: opened by the first lifespan, closed by the last."""

    def __init__(self, opener: Callable[[AsyncExitStack], Awaitable[AppState]]) -> None:
        self._opener = opener
        self._shares: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Share] = (
            weakref.WeakKeyDictionary()
        )

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[AppState]:
        share = self._shares.setdefault(asyncio.get_running_loop(), _Share())
        async with share.lock:
            if share.users == 0:
                stack = AsyncExitStack()
                try:
                    share.state = await self._opener(stack)
                except BaseException:
                    await stack.aclose()
                    raise
                share.stack = stack
            share.users += 1
        assert share.state is not None
        try:
            yield share.state
        finally:
            async with share.lock:
                share.users -= 1
                if share.users == 0 and share.stack is not None:
                    stack, share.stack, share.state = share.stack, None, None
                    await stack.aclose()


    def current(self) -> AppState:
        """The state open on the running loop, for handlers the SDK gives no context (static resources)."""
        share = self._shares.get(asyncio.get_running_loop())
        if share is None or share.state is None:
            raise RuntimeError("no stark-mcp session is open on this event loop")
        return share.state


def app_state(ctx: Context) -> AppState:
    return cast(AppState, ctx.request_context.lifespan_context)
