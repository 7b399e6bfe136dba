"""Open the application layer for one command: the store and the evaluator behind a ``RunService``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from stark_mcp.config import Settings
from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.orchestrator.service import RunService
from stark_mcp.store import Store


@asynccontextmanager
async def open_service(
    settings: Settings | None = None, eval_settings: EvalSettings | None = None
) -> AsyncIterator[RunService]:
    """A ``RunService`` over ``settings.database`` and an evaluator on ``settings.cache``, closed on exit."""
    resolved = settings or Settings.from_env()
    async with (
        await Store.open(resolved.database) as store,
        Evaluator(resolved.cache, settings=eval_settings or EvalSettings()) as evaluator,
    ):
        yield RunService(store, evaluator)
