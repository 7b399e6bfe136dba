"""The search strategies: STARK, the paper's comparison agents, and STARK with one component off.

A strategy fixes which tree policy picks the node to expand, whether the expansion uses the
role agents (plan + code, debug for bugs) or one generalist agent, and whether the prompt
carries the tree's history or is an independent sample from the root. The ablations (the
paper's Table 3, ``ABLATIONS``) also switch off the plan's span anchors or the role-specific
context windows.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from stark_mcp.orchestrator.errors import InvalidInput

Agents = Literal["roles", "generalist"]
# "roles": each role's window from the tree (docs/search.md); "recent": every role sees the same
# fixed window, the latest attempts in creation order.
Window = Literal["roles", "recent"]


class Strategy(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    policy: str
    agents: Agents
    history: bool
    description: str
    anchors: bool = True
    window: Window = "roles"

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
        # Ablations: STARK with exactly one component switched off.
        Strategy(
            name="no_roles", policy="stark", agents="generalist", history=True,
            description="STARK without the multi-agent roles: one generalist agent under the same "
            "search and context (the same configuration as search_only, named as an ablation)",
        ),
        Strategy(
            name="no_anchors", policy="stark", agents="roles", history=True, anchors=False,
            description="STARK without grounded instructions: the plan agent gives advice only, "
            "no span anchors, and the code agent rewrites freely",
        ),
        Strategy(
            name="no_windows", policy="stark", agents="roles", history=True, window="recent",
            description="STARK without dynamic context windows: every role sees the same fixed "
            "window, the latest attempts",
        ),
        Strategy(
            name="no_search", policy="sampling", agents="roles", history=True,
            description="STARK without the strategic search: best-of-K from the root with the "
            "role agents, anchors and context windows",
        ),
    )
}

DEFAULT_STRATEGY = "stark"

# ``--ablate`` component -> the strategy that switches it off.
ABLATIONS: dict[str, str] = {
    "roles": "no_roles", "anchors": "no_anchors", "windows": "no_windows", "search": "no_search",
}


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise InvalidInput(f"unknown strategy {name!r}; use one of {', '.join(STRATEGIES)}") from None
