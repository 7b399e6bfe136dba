"""Property tests over random run trees (hypothesis)."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from stark_mcp.records import Node
from stark_mcp.tree import PolicyConfig, Tree, context_window, eligible, leaderboard, select, step_rng
from stark_mcp.tree.leaderboard import normalise_source

from .builders import grow, make_node, trees

configs = st.builds(
    PolicyConfig,
    eps=st.sampled_from([0.0, 0.3, 0.5, 1.0]),
    n_root=st.integers(1, 5),
    n_child=st.integers(0, 3),
)
seeds = st.integers(0, 2**32)


# Reference implementations written from the formulas, on raw parent links, without Tree.
def kids(nodes: list[Node], node_id: str) -> list[Node]:
    return [n for n in nodes if n.parent_id == node_id]


def descendants(nodes: list[Node], node_id: str) -> set[str]:
    found = {node_id}
    changed = True
    while changed:
        changed = False
        for n in nodes:
            if n.parent_id in found and n.id not in found:
                found.add(n.id)
                changed = True
    return found


def dead(nodes: list[Node], node: Node, n_child: int) -> bool:
    children = kids(nodes, node.id)
    return node.parent_id is not None and len(children) > n_child and all(c.has_bug for c in children)


def formula(nodes: list[Node], i: str, role: str, top_r: int) -> set[str]:
    me = next(n for n in nodes if n.id == i)
    root = next(n for n in nodes if n.parent_id is None)
    children = {n.id for n in kids(nodes, i)}
    siblings = {n.id for n in nodes if me.parent_id is not None and n.parent_id == me.parent_id and n.id != i}
    if role == "plan":
        inside = descendants(nodes, i)
        correct = [
            n
            for n in nodes
            if n.id not in inside and n.id != root.id and n.evaluation is not None and n.evaluation.passed
        ]
        correct.sort(key=lambda n: (n.score, n.seq))
        top: list[Node] = []
        for n in correct:
            if len(top) < top_r and all(
                normalise_source(n.source) != normalise_source(t.source) for t in top
            ):
                top.append(n)
        found = children | {n.id for n in top}
    elif role == "code":
        found = children | {c.id for s in siblings for c in kids(nodes, s)}
    else:
        found = siblings
    return found - {i, root.id}


@settings(max_examples=100, deadline=None)
@given(trees(), configs, seeds)
def test_stark_respects_throttling_and_pruning_and_never_runs_dry(
    nodes: list[Node], config: PolicyConfig, seed: int
) -> None:
    tree = Tree(nodes)
    selection = select(tree, config, random.Random(seed))  # never NothingEligible: docs/search.md
    chosen = tree.get(selection.node_id)
    if len(kids(nodes, tree.root.id)) >= config.n_root:
        assert chosen.id != tree.root.id
    assert not dead(nodes, chosen, config.n_child)
    assert selection.action == ("debug" if chosen.has_bug and chosen.id != tree.root.id else "plan")
    if selection.reason.startswith("explore"):
        assert kids(nodes, chosen.id) == []


@settings(max_examples=100, deadline=None)
@given(trees(), st.integers(1, 5), st.integers(0, 3), seeds)
def test_eps_zero_always_picks_the_best_eligible_node(
    nodes: list[Node], n_root: int, n_child: int, seed: int
) -> None:
    tree = Tree(nodes)
    config = PolicyConfig(eps=0.0, n_root=n_root, n_child=n_child)
    candidates = [
        n
        for n in nodes
        if not dead(nodes, n, n_child) and (n.parent_id is not None or len(kids(nodes, n.id)) < n_root)
    ]
    assert {n.id for n in eligible(tree, config)} == {n.id for n in candidates}
    best = min(candidates, key=lambda n: (n.score, n.seq))
    assert select(tree, config, random.Random(seed)).node_id == best.id


@settings(max_examples=100, deadline=None)
@given(trees(), seeds)
def test_greedy_is_untrottled_eps_zero_stark(nodes: list[Node], seed: int) -> None:
    tree = Tree(nodes)
    candidates = [n for n in nodes if not dead(nodes, n, 3)]
    best = min(candidates, key=lambda n: (n.score, n.seq))
    assert select(tree, PolicyConfig(name="greedy"), random.Random(seed)).node_id == best.id


@settings(max_examples=100, deadline=None)
@given(trees(), st.sampled_from(["stark", "greedy", "sampling", "reflexion", "mcts"]), seeds)
def test_same_seed_same_selection_for_every_policy(nodes: list[Node], name: str, seed: int) -> None:
    config = PolicyConfig(name=name)  # type: ignore[arg-type]
    first = select(Tree(nodes), config, step_rng(seed, len(nodes)))
    again = select(Tree(list(reversed(nodes))), config, step_rng(seed, len(nodes)))
    assert first == again
    assert first.node_id in {n.id for n in nodes}


def simulate(seed: int, name: str, steps: int) -> list[tuple[str, str]]:
    """A whole run: select with the step's RNG, grow a child with a seeded outcome, repeat."""
    nodes = [make_node(0, None, ms=2.0, source="reference")]
    outcomes = random.Random(f"outcomes:{seed}")
    trace = []
    for step in range(1, steps + 1):
        selection = select(Tree(nodes), PolicyConfig(name=name), step_rng(seed, step))  # type: ignore[arg-type]
        trace.append((selection.node_id, selection.action))
        nodes.append(grow(nodes, selection.node_id, outcomes))
    return trace


@settings(max_examples=25, deadline=None)
@given(seeds, st.sampled_from(["stark", "mcts"]))
def test_same_seed_replays_the_same_run(seed: int, name: str) -> None:
    assert simulate(seed, name, 20) == simulate(seed, name, 20)


def test_different_seeds_give_different_runs() -> None:
    assert len({tuple(simulate(seed, "stark", 20)) for seed in range(5)}) > 1


@settings(max_examples=100, deadline=None)
@given(
    trees(),
    st.data(),
    st.sampled_from(["plan", "code", "debug"]),
    st.integers(0, 3),
    st.integers(0, 6),
    seeds,
)
def test_windows_hold_exactly_their_formula_capped(
    nodes: list[Node], data: st.DataObject, role: str, top_r: int, cap: int, seed: int
) -> None:
    tree = Tree(nodes)
    i = data.draw(st.sampled_from(sorted(n.id for n in nodes)))
    expected = formula(nodes, i, role, top_r)
    ids = context_window(tree, i, role, random.Random(seed), top_r=top_r, cap=cap)  # type: ignore[arg-type]
    assert ids == sorted(set(ids), key=lambda x: tree.get(x).seq)
    assert i not in ids and tree.root.id not in ids
    if len(expected) <= cap:
        assert set(ids) == expected
    else:
        assert len(ids) == cap and set(ids) <= expected
    assert ids == context_window(tree, i, role, random.Random(seed), top_r=top_r, cap=cap)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(trees(), st.integers(0, 8))
def test_leaderboard_is_sorted_distinct_and_complete(nodes: list[Node], k: int) -> None:
    board = leaderboard(Tree(nodes), k)
    assert all(n.evaluation is not None and n.evaluation.passed and n.parent_id is not None for n in board)
    assert [(n.score, n.seq) for n in board] == sorted((n.score, n.seq) for n in board)
    assert len({normalise_source(n.source) for n in board}) == len(board)
    distinct = {
        normalise_source(n.source) for n in nodes if n.parent_id is not None and math.isfinite(n.score)
    }
    assert len(board) == min(k, len(distinct))
    # Nothing left off beats the last entry with a new source.
    if board:
        shown = {normalise_source(n.source) for n in board}
        for n in nodes:
            if n.parent_id is not None and math.isfinite(n.score) and normalise_source(n.source) not in shown:
                assert (n.score, n.seq) > (board[-1].score, board[-1].seq)


@given(trees(), st.integers(1, 30), configs, seeds)
def test_a_tree_extended_with_newer_nodes_is_the_tree_built_at_once(
    nodes: list[Node], cut: int, config: PolicyConfig, seed: int
) -> None:
    whole = Tree(nodes)
    by_seq = list(whole)  # creation order: a run's tree only ever grows at the end
    grown = Tree(by_seq[:cut]).extended(by_seq[cut:])
    assert list(grown) == list(whole) and grown.root == whole.root
    for node in whole:
        assert grown.children(node.id) == whole.children(node.id)
    assert grown.leaves() == whole.leaves() and grown.latest() == whole.latest()
    assert leaderboard(grown, 5) == leaderboard(whole, 5)
    assert select(grown, config, random.Random(seed)) == select(whole, config, random.Random(seed))
