"""What the benchmark reports while it runs (``BenchEvent``) and the one status line it folds into.

Pure; the CLI draws it. The line shows the whole benchmark: pairs done, attempts, each
strategy's current geometric-mean speedup over eager, the LLM cost so far and an ETA
extrapolated from this session's pace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import BaseModel, Field

from stark_mcp.orchestrator.events import SearchEvent, describe_event

BenchEventKind = Literal[
    "started",
    "pair_started",
    "phase",
    "search",
    "pair_done",
    "pair_skipped",
    "pair_failed",
    "finished",
    "stopped",
]


class BenchEvent(BaseModel):
    kind: BenchEventKind
    pair: str | None = Field(None, description="KEY:STRATEGY of the pair this event is about")
    index: int = Field(0, description="1-based position of that pair")
    pairs: int
    pairs_done: int = Field(description="pairs whose run holds its whole budget")
    attempts_done: int = Field(description="attempts recorded over the whole benchmark")
    attempts_total: int
    session_attempts: int = Field(0, description="attempts recorded by this session (the ETA's pace)")
    elapsed_s: float = 0.0
    cost_usd: float = Field(0.0, description="LLM cost of the whole benchmark so far")
    best: dict[str, float] = Field(
        default_factory=dict, description="strategy -> geometric mean of best speedups over eager so far"
    )
    search: SearchEvent | None = None
    message: str = ""


BenchProgress = Callable[[BenchEvent], Awaitable[None]]


def eta_seconds(event: BenchEvent) -> float | None:
    if event.session_attempts <= 0 or event.elapsed_s <= 0:
        return None
    left = max(0, event.attempts_total - event.attempts_done)
    return left * event.elapsed_s / event.session_attempts


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def describe_bench_event(event: BenchEvent) -> str:
    where = f"[{event.index}/{event.pairs}] {event.pair}" if event.pair else "bench"
    if event.kind == "search" and event.search is not None:
        return f"{where}: {describe_event(event.search)}"
    if event.kind == "pair_skipped":
        return f"{where}: already complete, skipped"
    return f"{where}: {event.message or event.kind.replace('_', ' ')}"


class BenchProgressState(BaseModel):
    pairs: int = 0
    pairs_done: int = 0
    attempts_done: int = 0
    attempts_total: int = 0
    cost_usd: float = 0.0
    best: dict[str, float] = Field(default_factory=dict)
    eta_s: float | None = None
    activity: str = "starting"

    def apply(self, event: BenchEvent) -> BenchProgressState:
        return self.model_copy(
            update={
                "pairs": event.pairs,
                "pairs_done": event.pairs_done,
                "attempts_done": event.attempts_done,
                "attempts_total": event.attempts_total,
                "cost_usd": event.cost_usd,
                "best": event.best,
                "eta_s": eta_seconds(event),
                "activity": describe_bench_event(event),
            }
        )

    def status_line(self) -> str:
        best = " ".join(f"{name} {value:.2f}x" for name, value in self.best.items()) or "none yet"
        eta = format_duration(self.eta_s) if self.eta_s is not None else "-"
        return (
            f"pairs {self.pairs_done}/{self.pairs} | attempts {self.attempts_done}/{self.attempts_total} | "
            f"geomean vs eager: {best} | ${self.cost_usd:.4f} | ETA {eta}"
        )
