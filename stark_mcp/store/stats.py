"""A run's progress at a glance, computed in SQL."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RunStats(BaseModel):
    """A run's progress at a glance, computed in SQL for run listings."""

    run_id: str
    attempts: int = Field(description="nodes other than the root")
    passed: int = Field(description="attempts whose evaluation passed")
    best_node_id: str | None = Field(None, description="fastest passing attempt, the root excluded")
    best_score: float = Field(description="its median runtime in ms; +inf when nothing passed")
