"""When the headless loop stops launching attempts: the budget and the user's limits.

Pure: the loop passes in what it has counted and gets back the reason to stop, if any.
Limits are checked before each new expansion; attempts already in flight finish and are
recorded (they may overshoot a wall-time or cost limit by one attempt per worker).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from stark_mcp.records import Node

StopReason = Literal[
    "budget",  # the run's budget, or the attempts this call was asked to make, are spent
    "max_attempts",  # Limits.max_attempts attempts recorded by this call
    "max_wall",  # Limits.max_wall_s seconds since this call started
    "max_cost",  # the run's recorded LLM cost reached Limits.max_cost_usd
    "failures",  # Limits.max_consecutive_failures expansions in a row produced no attempt
    "llm_error",  # the model backend cannot be used at all (credentials, permissions)
    "interrupted",  # Ctrl-C or cancellation of the caller
    "sol",  # the best attempt reached Limits.stop_at_sol of the speed of light (docs/sol.md)
]


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_attempts: int | None = Field(None, ge=1, description="attempts this call may record")
    max_wall_s: float | None = Field(None, gt=0, description="seconds this call may run")
    max_cost_usd: float | None = Field(
        None, ge=0, description="LLM spending of the whole run, earlier sessions included"
    )
    max_consecutive_failures: int = Field(
        3, ge=1, description="expansions in a row that may end without an attempt (agent gave up, LLM error)"
    )
    stop_at_sol: float | None = Field(
        None, gt=0, description="stop once the best attempt reaches this fraction of its floor (0.9: 90%)"
    )


def sol_reached(limits: Limits, best: Node | None) -> str | None:
    """Why the run may stop at the speed of light: the best attempt's fraction reached
    ``stop_at_sol``; None when no limit is set, no attempt passed or no floor is known."""
    if limits.stop_at_sol is None or best is None or best.evaluation is None:
        return None
    sol = best.evaluation.sol
    if not best.evaluation.passed or sol is None or sol.fraction is None or sol.fraction < limits.stop_at_sol:
        return None
    beyond = ""
    if sol.beyond_roofline:
        beyond = " (beyond the reference's roofline: check it computes the same thing)"
    return (
        f"node {best.id} reached {sol.fraction:.0%} of its {sol.bound}-bound floor of {sol.floor_ms:.3g} ms, "
        f"at or above --stop-at-sol {limits.stop_at_sol:g}{beyond}"
    )


def limit_reached(
    limits: Limits,
    *,
    recorded: int,
    elapsed_s: float,
    cost_usd: float,
    consecutive_failures: int,
) -> StopReason | None:
    """The first limit that forbids another expansion, or None. ``recorded`` counts this call's attempts."""
    if limits.max_attempts is not None and recorded >= limits.max_attempts:
        return "max_attempts"
    if limits.max_wall_s is not None and elapsed_s >= limits.max_wall_s:
        return "max_wall"
    if limits.max_cost_usd is not None and cost_usd >= limits.max_cost_usd:
        return "max_cost"
    if consecutive_failures >= limits.max_consecutive_failures:
        return "failures"
    return None


STOP_MESSAGES: dict[str, str] = {
    "budget": "the attempt budget is spent",
    "max_attempts": "the --max-attempts limit was reached",
    "max_wall": "the wall-time limit was reached",
    "max_cost": "the cost limit was reached",
    "failures": "too many expansions in a row produced no attempt",
    "llm_error": "the model backend cannot be used",
    "interrupted": "interrupted",
    "sol": "the best attempt reached the --stop-at-sol fraction of the speed of light",
}
