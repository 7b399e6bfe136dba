"""What the headless loop reports while it runs (``SearchEvent``) and when it stops (``SearchSummary``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import BaseModel, Field

from stark_mcp.orchestrator.limits import StopReason
from stark_mcp.records import Usage

EventKind = Literal["started", "selected", "llm", "evaluated", "recorded", "failed", "finished", "stopped"]


class SearchEvent(BaseModel):
    """One step of the loop, with the run's running totals so a display needs no other state."""

    kind: EventKind
    run_id: str
    attempt: int = Field(description="attempts recorded in the run so far (the root not counted)")
    budget: int = Field(description="the run's budget")
    target: int = Field(description="attempts the run will hold when this call has made all it may")
    step: int | None = Field(None, description="the expansion's step (its RNG is step_rng(seed, step))")
    node_id: str | None = Field(None, description="selected: the node expanded; recorded: the new node")
    parent_id: str | None = None
    action: str | None = None
    role: str | None = Field(None, description="llm: the agent that answered")
    verdict: str | None = None
    speedup: float | None = Field(None, description="the new node's speedup over eager, when it passed")
    best_node_id: str | None = None
    best_speedup: float | None = Field(None, description="best speedup over eager so far")
    tokens: int = Field(0, description="input + output tokens of the run so far")
    cost_usd: float = 0.0
    stop_reason: StopReason | None = None
    message: str = ""


SearchProgress = Callable[[SearchEvent], Awaitable[None]]


class FailedExpansion(BaseModel):
    """An expansion that produced no attempt; its LLM exchanges stay logged without a node."""

    step: int
    node_id: str
    action: str
    error: str
    exchange_ids: list[int] = Field(default_factory=list)


class SearchSummary(BaseModel):
    run_id: str
    strategy: str
    policy: str
    status: str = Field(description="the run's status after this call")
    stop_reason: StopReason
    message: str
    attempts: int = Field(description="attempts the run holds (the root not counted)")
    new_attempts: int = Field(description="attempts recorded by this call")
    budget: int
    failed_expansions: list[FailedExpansion] = Field(default_factory=list)
    best_node_id: str | None = None
    best_runtime_ms: float | None = None
    eager_ms: float | None = None
    speedups: dict[str, float] = Field(default_factory=dict, description="the best node's, by baseline")
    usage: Usage = Field(default_factory=Usage, description="LLM usage of the whole run")
    wall_s: float = Field(0.0, description="seconds this call ran")


def describe_event(event: SearchEvent) -> str:
    """One line for logs and progress notifications."""
    head = f"attempt {event.attempt}/{event.target}"
    best = f", best {event.best_speedup:.2f}x ({event.best_node_id})" if event.best_speedup else ""
    if event.kind == "selected":
        return f"{head}: expanding {event.node_id} with {event.action} (step {event.step})"
    if event.kind == "llm":
        return f"{head}: {event.role} agent answered for {event.node_id}"
    if event.kind == "evaluated":
        return f"{head}: evaluated child of {event.parent_id}: {event.verdict}"
    if event.kind == "recorded":
        speed = f" {event.speedup:.2f}x" if event.speedup is not None else ""
        made = f"{event.node_id} ({event.action} of {event.parent_id})"
        return f"{head}: recorded {made}: {event.verdict}{speed}{best}"
    if event.kind == "failed":
        return f"{head}: expansion of {event.node_id} produced no attempt: {event.message}"
    if event.kind in ("finished", "stopped"):
        return f"{head}: {event.kind} ({event.stop_reason}){best}"
    return f"{head}: {event.message or event.kind}{best}"
