"""Records that only the store defines: runs, stored evaluations and LLM exchanges.

Nodes are ``stark_mcp.records.Node``; these are the store's other rows as the
rest of the package sees them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from stark_mcp.problems import Problem
from stark_mcp.records import Evaluation, TimingStats, Usage

RunStatus = Literal["created", "running", "finished", "interrupted", "failed"]


class RunRecord(BaseModel):
    """One optimization of one problem on one device, with everything needed to resume it."""

    id: str = Field(description='short, typeable, unique, e.g. "r-7kq2mz"')
    name: str
    problem: Problem
    device: str = Field(description='"cpu" | "cuda" | "auto" as requested')
    strategy: str = "stark"
    policy: dict[str, Any] = Field(description="the tree PolicyConfig as a dict")
    budget: int = Field(description="attempts allowed, the root not counted")
    seed: int
    config: dict[str, Any] = Field(default_factory=dict)
    baselines: dict[str, TimingStats] = Field(default_factory=dict)
    status: RunStatus = "created"
    created_at: float
    updated_at: float


class ExchangeRecord(BaseModel):
    """One LLM call as sent and as answered, kept for audit and for ``stark-mcp show``."""

    id: int
    run_id: str
    node_id: str | None = None
    role: str
    model: str
    request: dict[str, Any]
    reply: str
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    created_at: float


class StoredEvaluation(BaseModel):
    """An evaluation made outside the tree (MCP ``evaluate_kernel``) that a node may later reuse."""

    id: str = Field(description='short, typeable, unique, e.g. "e-4w9c1dpx"')
    run_id: str
    source_hash: str
    evaluation: Evaluation
    created_at: float


class RunStats(BaseModel):
    """A run's progress at a glance, computed in SQL for run listings."""

    run_id: str
    attempts: int = Field(description="nodes other than the root")
    passed: int = Field(description="attempts whose evaluation passed")
    best_node_id: str | None = Field(None, description="fastest passing attempt, the root excluded")
    best_score: float = Field(description="its median runtime in ms; +inf when nothing passed")
