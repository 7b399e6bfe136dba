"""The search strategies: STARK and the paper's comparison agents, as (policy, agents, context) triples.

A strategy fixes three things: which tree policy picks the node to expand, whether the
expansion uses the role agents (plan + code, debug for bugs) or one generalist agent, and
whether the prompt carries the tree's history or is an independent sample from the root.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from stark_mcp.orchestrator.errors import InvalidInput

Agents = Literal["roles", "generalist"]


class Strategy(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    policy: str
    agents: Agents
    history: bool
    description: str

    @property
    def vary_focus(self) -> bool:
        """Independent samples see identical prompts; a rotating focus theme keeps them apart
        (the API gives no sampling temperature with thinking on, see docs/llm.md)."""
        return not self.history


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            name="stark", policy="stark", agents="roles", history=True,
            description="adapted epsilon-greedy tree search; plan+code agents with span anchors, "
            "debug agent for failing nodes; role-specific context windows",
        ),
        Strategy(
            name="sampling", policy="sampling", agents="generalist", history=False,
            description="best-of-K: every attempt drawn independently from the root by one agent",
        ),
        Strategy(
            name="reflexion", policy="reflexion", agents="generalist", history=True,
            description="linear refinement: one agent always improves or repairs the latest attempt",
        ),
        Strategy(
            name="search_only", policy="stark", agents="generalist", history=True,
            description="STARK's tree search with one generalist agent (no plan, no anchors)",
        ),
        Strategy(
            name="ma_only", policy="sampling", agents="roles", history=False,
            description="plan+code roles with grounded instructions, every attempt from the root "
            "(best-of-K with roles, no search)",
        ),
    )
}

DEFAULT_STRATEGY = "stark"


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise InvalidInput(f"unknown strategy {name!r}; use one of {', '.join(STRATEGIES)}") from None
