"""Progress from the core, relayed to MCP as strictly increasing absolute values.

The core reports per phase (the problem check, then baselines from 0, then the
evaluator's steps), so its raw ``done`` values restart; MCP wants one increasing
sequence per request. ``MonotonicProgress`` is the pure mapping; ``relay`` binds it
to a request's context.
"""

from __future__ import annotations

import math

from mcp.server.mcpserver import Context

from stark_mcp.orchestrator.events import SearchEvent, SearchProgress, describe_event
from stark_mcp.progress import Progress
from stark_mcp.server.tasks.manager import current_task


class MonotonicProgress:
    """Maps phase-relative ``(done, total)`` pairs onto one strictly increasing scale.

    A phase restarts when ``done`` goes down or ``total`` changes; it then continues from
    the last value reported. A value that would not increase is nudged up by one.
    """

    def __init__(self) -> None:
        self._offset = 0.0
        self._last = 0.0
        self._raw: tuple[float, float | None] | None = None

    def step(self, done: float, total: float | None) -> tuple[float, float | None]:
        if self._raw is not None and (done < self._raw[0] or total != self._raw[1]):
            self._offset = self._last
        self._raw = (done, total)
        value = self._offset + done
        if value <= self._last:
            value = self._last + 1.0
            self._offset = value - done
        self._last = value
        scaled_total = self._offset + total if total is not None else None
        return value, scaled_total


def relay(ctx: Context) -> Progress:
    """A core progress callback that reports to the calling client (a no-op if it asked for none)."""
    scale = MonotonicProgress()

    task = current_task()

    async def report(done: float, total: float | None, message: str) -> None:
        if task is not None:  # a task's request was answered long ago: progress is its status
            task.phase(message)
            return
        value, scaled_total = scale.step(done, total)
        await ctx.report_progress(value, scaled_total, message)

    return report


class AttemptProgress:
    """Maps search events onto attempts: ``attempt`` recorded so far, out of ``target``.

    Several events share one attempt count (selected, llm, evaluated); each moves the value
    halfway towards the next whole attempt, so it rises strictly without passing it. An event
    that could only be shown beyond the total (the loop's last word after its last attempt)
    gets ``None``: it is not reported.
    """

    def __init__(self) -> None:
        self._last: float | None = None

    def step(self, attempt: int, target: int) -> tuple[float, float] | None:
        total = float(max(target, attempt))
        value = float(attempt)
        if self._last is not None and value <= self._last:
            next_whole = math.floor(self._last) + 1
            value = self._last + (next_whole - self._last) / 2
        if value > total:
            return None
        self._last = value
        return value, total


def search_relay(ctx: Context) -> SearchProgress:
    """A loop progress callback that reports each search event to the calling client."""
    scale = AttemptProgress()
    task = current_task()

    async def report(event: SearchEvent) -> None:
        if task is not None:
            task.phase(f"attempt {event.attempt}/{event.target}: {describe_event(event)}")
            return
        scaled = scale.step(event.attempt, event.target)
        if scaled is not None:
            await ctx.report_progress(scaled[0], scaled[1], describe_event(event))

    return report
