"""The fastest distinct correct attempts of a run."""

from __future__ import annotations

import math
from collections.abc import Iterable

from stark_mcp.records import Action, Node
from stark_mcp.tree.errors import TreeError
from stark_mcp.tree.structure import Tree


def normalise_source(source: str) -> str:
    """Source with every whitespace run collapsed, so reformatted copies count as one kernel."""
    return " ".join(source.split())


def is_correct(node: Node) -> bool:
    return node.evaluation is not None and node.evaluation.passed and math.isfinite(node.score)


def rank(nodes: Iterable[Node], k: int) -> list[Node]:
    """The k fastest distinct correct non-root nodes among ``nodes``: fastest first, ties by seq.

    Of several nodes with the same normalised source only the fastest (then earliest) counts.
    """
    if k < 0:
        raise TreeError(f"a leaderboard size must be >= 0, got {k}")
    candidates = sorted(
        (n for n in nodes if n.action is not Action.ROOT and is_correct(n)),
        key=lambda n: (n.score, n.seq, n.id),
    )
    seen: set[str] = set()
    board: list[Node] = []
    for node in candidates:
        if len(board) == k:
            break
        key = normalise_source(node.source)
        if key in seen:
            continue
        seen.add(key)
        board.append(node)
    return board


def leaderboard(tree: Tree, k: int) -> list[Node]:
    """The k fastest distinct correct non-root nodes of the tree, fastest first, ties by seq."""
    return rank(tree, k)
