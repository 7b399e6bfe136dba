"""The search policy's knobs and the record of one selection."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PolicyName = Literal["stark", "sampling", "reflexion", "greedy", "mcts"]
SelectAction = Literal["plan", "debug"]
Role = Literal["plan", "code", "debug"]


class PolicyConfig(BaseModel):
    """Which policy picks the next node, and its parameters (defaults are the paper's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: PolicyName = "stark"
    eps: float = Field(0.3, ge=0.0, le=1.0, description="stark: probability of exploring a random leaf")
    n_root: int = Field(5, ge=1, description="stark: most children the root may take (root throttling)")
    n_child: int = Field(
        3, ge=0, description="stark/greedy: a node with more children than this, all failed, is dead"
    )
    top_r: int = Field(2, ge=0, description="leaderboard entries shown in the plan agent's window")
    window_cap: int = Field(5, ge=0, description="most historical nodes in any context window")
    mcts_c: float = Field(1.0, ge=0.0, description="mcts: UCT exploration constant")
    mcts_widen: float = Field(
        0.5, gt=0.0, le=1.0, description="mcts: progressive widening exponent, children <= ceil(N^widen)"
    )


class Selection(BaseModel):
    """The node to expand next, how to expand it, and why (a sentence for logs and the MCP host)."""

    model_config = ConfigDict(frozen=True)

    node_id: str
    action: SelectAction
    reason: str
