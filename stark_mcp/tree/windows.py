"""Role-specific context windows: which past attempts each agent sees (paper, section 4).

With i the selected node, D(i) its children and S(i) its siblings:
  plan:  {i, root} + D(i) + Top-r(leaderboard outside i's subtree)
  code:  {i, root} + D(i) + children of i's siblings
  debug: {i, root} + S(i)
i and the root are always shown; this module returns only the historical part.
"""

from __future__ import annotations

import random

from stark_mcp.records import Node
from stark_mcp.tree.config import Role
from stark_mcp.tree.errors import TreeError
from stark_mcp.tree.leaderboard import leaderboard
from stark_mcp.tree.structure import Tree


def window_candidates(tree: Tree, node_id: str, role: Role, *, top_r: int = 2) -> list[Node]:
    """Every historical node the role's formula admits (uncapped), in seq order."""
    tree.get(node_id)
    if role == "plan":
        picked = tree.children(node_id) + leaderboard(tree, top_r, excluding=tree.subtree_ids(node_id))
    elif role == "code":
        picked = tree.children(node_id) + [c for s in tree.siblings(node_id) for c in tree.children(s.id)]
    elif role == "debug":
        picked = tree.siblings(node_id)
    else:
        raise TreeError(f"unknown role {role!r}; expected plan, code or debug")
    excluded = {node_id, tree.root.id}
    unique = {n.id: n for n in picked if n.id not in excluded}
    return sorted(unique.values(), key=lambda n: (n.seq, n.id))


def context_window(
    tree: Tree, node_id: str, role: Role, rng: random.Random, *, top_r: int = 2, cap: int = 5
) -> list[str]:
    """The historical node ids the role sees for node ``node_id``, in seq order.

    Never includes ``node_id`` or the root (they are always shown). When more than ``cap``
    qualify, ``cap`` of them are sampled with ``rng``; ``rng`` is untouched otherwise.
    """
    if cap < 0:
        raise TreeError(f"a window cap must be >= 0, got {cap}")
    nodes = window_candidates(tree, node_id, role, top_r=top_r)
    if len(nodes) > cap:
        nodes = sorted(rng.sample(nodes, cap), key=lambda n: (n.seq, n.id))
    return [n.id for n in nodes]


def recent_window(tree: Tree, node_id: str, *, cap: int = 5) -> list[str]:
    """The fixed window of the no-windows ablation: the ``cap`` latest attempts, whatever the role.

    Like ``context_window`` it never includes ``node_id`` or the root, and returns seq order.
    """
    if cap < 0:
        raise TreeError(f"a window cap must be >= 0, got {cap}")
    tree.get(node_id)
    others = [n for n in tree if n.id not in (node_id, tree.root.id)]
    return [n.id for n in others[-cap:]] if cap else []
