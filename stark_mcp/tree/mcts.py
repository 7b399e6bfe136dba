"""Monte Carlo tree search (UCT with progressive widening) as a comparison policy.

The tree is rebuilt from stored nodes at every step, so there is no separate backup pass: a
node's visit count is the size of its subtree and its value the mean reward in that subtree,
which is exactly what incremental backpropagation would have accumulated.
"""

from __future__ import annotations

import math

from stark_mcp.records import Node
from stark_mcp.tree.config import PolicyConfig, Selection
from stark_mcp.tree.eligibility import action_for, describe
from stark_mcp.tree.leaderboard import is_correct
from stark_mcp.tree.structure import Tree


def reward(node: Node, root_score: float) -> float:
    """x / (1 + x) for speedup x over the root when correct, else 0: in [0, 1), 0.5 at parity.

    Bounded so the UCT exploration term stays on the same scale; monotone in speedup. With no
    timed reference every correct node counts as parity.
    """
    if not is_correct(node):
        return 0.0
    speedup = root_score / node.score if math.isfinite(root_score) and node.score > 0 else 1.0
    return speedup / (1.0 + speedup)


def subtree_stats(tree: Tree) -> dict[str, tuple[int, float]]:
    """(visits, total reward) per node, where visits is the subtree size."""
    root_score = tree.root.score
    stats: dict[str, tuple[int, float]] = {}
    # Children have higher seq than parents in a recorded run, but hand-built trees need not,
    # so accumulate in post-order rather than by reverse seq.
    order: list[Node] = []
    frontier = [tree.root]
    while frontier:
        node = frontier.pop()
        order.append(node)
        frontier.extend(tree.children(node.id))
    for node in reversed(order):
        visits, total = 1, reward(node, root_score)
        for child in tree.children(node.id):
            child_visits, child_total = stats[child.id]
            visits += child_visits
            total += child_total
        stats[node.id] = (visits, total)
    return stats


def widening_limit(visits: int, exponent: float) -> int:
    """How many children a node with this many visits may have before the search descends."""
    return math.ceil(visits**exponent)


def uct(child_stats: tuple[int, float], log_parent_visits: float, c: float) -> float:
    """Mean reward plus the exploration bonus c * sqrt(ln N(parent) / N(child))."""
    visits, total = child_stats
    return total / visits + c * math.sqrt(log_parent_visits / visits)


def select_uct(tree: Tree, config: PolicyConfig) -> Selection:
    stats = subtree_stats(tree)
    node = tree.root
    path = [node.id]
    while True:
        children = tree.children(node.id)
        visits, _ = stats[node.id]
        if len(children) < widening_limit(visits, config.mcts_widen):
            break
        log_n = math.log(visits)
        # max by UCT, ties to the earliest child: negate seq so max() prefers the lower one.
        node = max(children, key=lambda c: (uct(stats[c.id], log_n, config.mcts_c), -c.seq))
        path.append(node.id)
    visits, total = stats[node.id]
    return Selection(
        node_id=node.id,
        action=action_for(tree, node),
        reason=(
            f"mcts: UCT path {' > '.join(path)}; expand {describe(node)} "
            f"(visits {visits}, mean reward {total / visits:.3f})"
        ),
    )
