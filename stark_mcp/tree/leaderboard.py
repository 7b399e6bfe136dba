"""The fastest distinct correct attempts of a run."""

from __future__ import annotations

import functools
import math
import re
import weakref
from collections.abc import Collection, Iterable

from stark_mcp.records import Action, Node
from stark_mcp.tree.errors import TreeError
from stark_mcp.tree.structure import Tree


@functools.lru_cache(maxsize=16384)
def normalise_source(source: str) -> str:
    """The source without its comments and with every whitespace run collapsed, so copies that
    differ only in comments or layout count as one kernel. ``#`` inside a string literal (a C++
    ``#include`` in a kernel's source) is kept. Memoized: a leaderboard asks again on every read."""
    return " ".join(_COMMENT_OR_STRING.sub(_keep_strings, source).split())


# A string literal (kept) or a comment (dropped); triple quotes first so they win over single ones.
_STRING = "|".join((
    r'"""[\s\S]*?"""',
    r"'''[\s\S]*?'''",
    r'"(?:\\.|[^"\\\n])*"',
    r"'(?:\\.|[^'\\\n])*'",
))
_COMMENT_OR_STRING = re.compile(rf"(?P<string>[rRbBuUfF]{{0,2}}(?:{_STRING}))|#[^\n]*")


def _keep_strings(match: re.Match[str]) -> str:
    return match.group("string") or ""


def is_correct(node: Node) -> bool:
    return node.evaluation is not None and node.evaluation.passed and math.isfinite(node.score)


def rank(nodes: Iterable[Node], k: int) -> list[Node]:
    """The k fastest distinct correct non-root nodes among ``nodes``: fastest first, ties by seq.

    Of several nodes with the same normalised source only the fastest (then earliest) counts.
    """
    return _distinct(_fastest_first(nodes), k)


def leaderboard(tree: Tree, k: int, *, excluding: Collection[str] = ()) -> list[Node]:
    """The k fastest distinct correct non-root nodes of the tree, fastest first, ties by seq;
    ``excluding`` names nodes left out (a subtree, for the plan role's window).

    The tree's correct nodes are sorted once per tree (trees never change), so a leaderboard
    read again costs a walk down that order, not a sort.
    """
    ordered = _SORTED.get(tree)
    if ordered is None:
        ordered = _SORTED[tree] = tuple(_fastest_first(tree))
    if excluding:
        return _distinct((n for n in ordered if n.id not in excluding), k)
    return _distinct(ordered, k)


_SORTED: weakref.WeakKeyDictionary[Tree, tuple[Node, ...]] = weakref.WeakKeyDictionary()


def _fastest_first(nodes: Iterable[Node]) -> list[Node]:
    return sorted(
        (n for n in nodes if n.action is not Action.ROOT and is_correct(n)),
        key=lambda n: (n.score, n.seq, n.id),
    )


def _distinct(ordered: Iterable[Node], k: int) -> list[Node]:
    if k < 0:
        raise TreeError(f"a leaderboard size must be >= 0, got {k}")
    seen: set[str] = set()
    board: list[Node] = []
    for node in ordered:
        if len(board) == k:
            break
        key = normalise_source(node.source)
        if key not in seen:
            seen.add(key)
            board.append(node)
    return board
