"""The pure STARK search: the tree of attempts, selection policies, context windows, leaderboard.

No IO, no asyncio, no SDKs. Every random choice comes from a ``random.Random`` the caller
passes in (``step_rng(seed, step)`` for a run), so a run is reproducible from its seed.
Anchor parsing for plans lives in ``stark_mcp.tree.anchors`` (re-exported here).
"""

from stark_mcp.tree.anchors import (
    BEGIN_MARK,
    END_MARK,
    AnchoredPlan,
    Span,
    adherence,
    strip_anchor_lines,
    validate_plan,
)
from stark_mcp.tree.config import PolicyConfig, PolicyName, Role, Selection
from stark_mcp.tree.eligibility import eligible, is_dead
from stark_mcp.tree.errors import AnchorError, NothingEligible, TreeError
from stark_mcp.tree.in_flight import crowded, select_around
from stark_mcp.tree.leaderboard import leaderboard
from stark_mcp.tree.policies import select
from stark_mcp.tree.seeding import step_rng
from stark_mcp.tree.structure import Tree
from stark_mcp.tree.windows import context_window, recent_window, window_candidates

__all__ = [
    "BEGIN_MARK",
    "END_MARK",
    "AnchoredPlan",
    "Span",
    "adherence",
    "strip_anchor_lines",
    "validate_plan",
    "AnchorError",
    "NothingEligible",
    "PolicyConfig",
    "PolicyName",
    "Role",
    "Selection",
    "Tree",
    "TreeError",
    "context_window",
    "crowded",
    "eligible",
    "is_dead",
    "leaderboard",
    "recent_window",
    "select",
    "select_around",
    "step_rng",
    "window_candidates",
]
