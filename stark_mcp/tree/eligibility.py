"""Which nodes a policy may expand: root throttling and dead-branch pruning."""

from __future__ import annotations

from stark_mcp.records import Node
from stark_mcp.tree.config import PolicyConfig, SelectAction
from stark_mcp.tree.structure import Tree


def is_dead(tree: Tree, node: Node, n_child: int) -> bool:
    """More than ``n_child`` children and every one failed: the branch is pruned.

    A childless node is never dead, which is what guarantees the stark policy always has a
    candidate (see docs/search.md).
    """
    # Counted first: most nodes have few children, and listing them all for every node is what
    # a selection on a large tree would spend its time on.
    return tree.child_count(node.id) > n_child and all(child.has_bug for child in tree.children(node.id))


def eligible(tree: Tree, config: PolicyConfig) -> list[Node]:
    """The nodes the configured policy may select, in seq order."""
    root = tree.root
    if config.name == "sampling":
        return [root]
    if config.name == "reflexion":
        return [tree.latest()]
    if config.name == "mcts":
        return list(tree)
    nodes: list[Node] = []
    for node in tree:
        if node.id == root.id:
            # The root is governed by throttling alone (greedy does not throttle); pruning it
            # would end a run whose first attempts all failed.
            if config.name == "greedy" or tree.child_count(root.id) < config.n_root:
                nodes.append(node)
        elif not is_dead(tree, node, config.n_child):
            nodes.append(node)
    return nodes


def expandable_leaves(tree: Tree, nodes: list[Node]) -> list[Node]:
    """The childless nodes among ``nodes`` (exploration targets, failing ones included)."""
    return [n for n in nodes if not tree.child_count(n.id)]


def best(nodes: list[Node]) -> Node:
    """Lowest score (median ms, +inf unless passed); ties go to the earliest node."""
    return min(nodes, key=lambda n: (n.score, n.seq, n.id))


def action_for(tree: Tree, node: Node) -> SelectAction:
    """Debug repairs a failing attempt; anything else (the root included) is improved by plan+code."""
    return "debug" if node.has_bug and node.id != tree.root.id else "plan"


def describe(node: Node) -> str:
    """A short phrase on a node's state, for selection reasons."""
    if node.evaluation is None:
        return f"{node.id} (not evaluated)"
    if node.evaluation.passed:
        return f"{node.id} ({node.score:.4g} ms)"
    return f"{node.id} (failing: {node.evaluation.status.value})"
