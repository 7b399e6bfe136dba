"""Sample records for the store tests: a small problem of our own and evaluations of it."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

from stark_mcp.records import CorrectnessReport, Evaluation, Status, TimingStats

PROBLEM_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2.0


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''


def timing(median_ms: float) -> TimingStats:
    return TimingStats(
        median_ms=median_ms, iqr_ms=median_ms / 10, mean_ms=median_ms * 1.01,
        min_ms=median_ms * 0.9, max_ms=median_ms * 1.3, samples=25,
    )


def passed(median_ms: float) -> Evaluation:
    return Evaluation(
        status=Status.PASSED,
        runtime=timing(median_ms),
        baselines={"eager": timing(2.0)},
        speedups={"eager": 2.0 / median_ms},
        correctness=CorrectnessReport(trials=3, trials_passed=3, max_abs_error=1e-6, rel_norm_error=2e-7),
        device="cpu",
        source_hash="abc",
        logs={"build": "ok"},
    )


def failed(status: Status = Status.BUILD_ERROR) -> Evaluation:
    return Evaluation(
        status=status, reason="compile", message="error: expected ';'", logs={"build": "x.cu:3"}
    )


class CancellingConnection:
    """The store's connection, with a cancellation of ``victim`` injected at one statement.

    Counts the statements sent through it; at statement ``at`` it cancels ``victim`` either
    before sending it or after it has run (as when aiosqlite's thread has executed a statement
    whose awaiting coroutine is cancelled), then yields once so the cancellation is delivered
    there, whatever task runs the statement.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.count = 0
        self.victim: asyncio.Task[Any] | None = None
        self.at = 0
        self.moment = "after"

    def arm(self, victim: asyncio.Task[Any], at: int, moment: str) -> None:
        self.victim, self.at, self.moment, self.count = victim, at, moment, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    def execute(self, sql: str, parameters: Any = ()) -> _Statement:
        return _Statement(self, sql, parameters)

    async def _run(self, sql: str, parameters: Any) -> Any:
        self.count += 1
        strike = self.victim is not None and self.count == self.at
        if strike and self.moment == "before":
            await self._strike()
        cursor = await self.conn.execute(sql, parameters)
        if strike and self.moment == "after":
            await self._strike()
        return cursor

    async def _strike(self) -> None:
        assert self.victim is not None
        self.victim.cancel()
        await asyncio.sleep(0)


class _Statement:
    """Awaitable and usable with ``async with``, like aiosqlite's own result."""

    def __init__(self, owner: CancellingConnection, sql: str, parameters: Any) -> None:
        self.owner, self.sql, self.parameters = owner, sql, parameters
        self.cursor: Any = None

    def __await__(self) -> Generator[Any, None, Any]:
        return self.owner._run(self.sql, self.parameters).__await__()

    async def __aenter__(self) -> Any:
        self.cursor = await self.owner._run(self.sql, self.parameters)
        return self.cursor

    async def __aexit__(self, *exc: object) -> None:
        await self.cursor.close()
