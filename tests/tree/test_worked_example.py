"""The worked example of docs/search.md, checked against the code so the docs stay true."""

import random

from stark_mcp.records import Status
from stark_mcp.tree import PolicyConfig, Tree, context_window, eligible, leaderboard, select, step_rng
from stark_mcp.tree.eligibility import expandable_leaves

from .builders import make_node


def example() -> Tree:
    return Tree(
        [
            make_node(0, None, ms=2.0),
            make_node(1, 0, ms=1.6),
            make_node(2, 0, status=Status.BUILD_ERROR),
            make_node(3, 1, ms=1.2),
            make_node(4, 1, status=Status.WRONG_OUTPUT),
            make_node(5, 0, ms=1.9),
            make_node(6, 2, status=Status.BUILD_ERROR),
            make_node(7, 2, status=Status.RUNTIME_ERROR),
            make_node(8, 2, status=Status.TIMEOUT),
            make_node(9, 2, status=Status.BUILD_ERROR),
            make_node(10, 0, ms=2.4),
            make_node(11, 0, status=Status.LOAD_ERROR),
        ]
    )


def ids(nodes: list) -> list[str]:
    return [n.id for n in nodes]


def test_worked_example_matches_the_docs() -> None:
    tree, config = example(), PolicyConfig()
    candidates = eligible(tree, config)
    assert ids(candidates) == ["n1", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10", "n11"]
    assert ids(expandable_leaves(tree, candidates)) == [
        "n3",
        "n4",
        "n5",
        "n6",
        "n7",
        "n8",
        "n9",
        "n10",
        "n11",
    ]

    assert round(step_rng(42, 12).random(), 3) == 0.669
    step12 = select(tree, config, step_rng(42, 12))
    assert (step12.node_id, step12.action) == ("n3", "plan")
    assert round(step_rng(42, 13).random(), 3) == 0.293
    step13 = select(tree, config, step_rng(42, 13))
    assert (step13.node_id, step13.action) == ("n9", "debug")

    assert context_window(tree, "n1", "plan", step_rng(42, 12)) == ["n3", "n4", "n5", "n10"]
    assert context_window(tree, "n1", "code", step_rng(42, 12)) == ["n3", "n4", "n6", "n7", "n9"]
    assert context_window(tree, "n1", "debug", step_rng(42, 12)) == ["n2", "n5", "n10", "n11"]

    assert ids(leaderboard(tree, 3)) == ["n3", "n1", "n5"]
    rng = random.Random(0)
    assert select(tree, PolicyConfig(name="greedy"), rng).node_id == "n3"
    assert select(tree, PolicyConfig(name="sampling"), rng).node_id == "n0"
    assert select(tree, PolicyConfig(name="reflexion"), rng).node_id == "n11"
    mcts = select(tree, PolicyConfig(name="mcts"), rng)
    assert (mcts.node_id, mcts.action) == ("n5", "plan")
    assert mcts.reason.startswith("mcts: UCT path n0 > n5")
