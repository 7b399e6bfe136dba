"""The fastest distinct correct attempts of a run."""

from __future__ import annotations

import io
import math
import tokenize
from collections.abc import Iterable

from stark_mcp.records import Action, Node
from stark_mcp.tree.errors import TreeError
from stark_mcp.tree.structure import Tree


def normalise_source(source: str) -> str:
    """The source's tokens without comments, one space apart, so copies that differ only in
    comments or layout count as one kernel. Source that does not tokenize has only its
    whitespace runs collapsed."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return " ".join(source.split())
    return " ".join(" ".join(tok.string.split()) for tok in tokens if tok.type not in _LAYOUT)


# Comments and the tokens that only carry layout (line ends, indentation, the end marker).
_LAYOUT = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)


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
