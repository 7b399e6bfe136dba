import math
import random

from stark_mcp.records import Status
from stark_mcp.tree import PolicyConfig, Tree, select
from stark_mcp.tree.mcts import reward, subtree_stats, widening_limit

from .builders import make_node

MCTS = PolicyConfig(name="mcts")


def test_reward_is_a_bounded_monotone_function_of_speedup() -> None:
    assert reward(make_node(1, 0, ms=2.0), 2.0) == 0.5
    assert math.isclose(reward(make_node(1, 0, ms=1.0), 2.0), 2 / 3)
    assert math.isclose(reward(make_node(1, 0, ms=4.0), 2.0), 1 / 3)
    assert reward(make_node(1, 0, status=Status.TIMEOUT), 2.0) == 0.0
    assert reward(make_node(1, 0, evaluated=False), 2.0) == 0.0
    assert reward(make_node(1, 0, ms=3.0), math.inf) == 0.5


def test_visits_are_subtree_sizes_and_values_sum_rewards() -> None:
    tree = Tree(
        [
            make_node(0, None, ms=2.0),
            make_node(1, 0, ms=1.0),
            make_node(2, 1, ms=2.0),
            make_node(3, 0, status=Status.BUILD_ERROR),
        ]
    )
    stats = subtree_stats(tree)
    assert stats["n2"] == (1, 0.5)
    assert stats["n1"][0] == 2 and math.isclose(stats["n1"][1], 2 / 3 + 0.5)
    assert stats["n3"] == (1, 0.0)
    assert stats["n0"][0] == 4 and math.isclose(stats["n0"][1], 0.5 + 2 / 3 + 0.5)


def test_widening_lets_a_node_take_ceil_sqrt_visits_children() -> None:
    assert [widening_limit(n, 0.5) for n in (1, 2, 3, 4, 5, 10)] == [1, 2, 2, 2, 3, 4]
    assert widening_limit(7, 1.0) == 7


def test_uct_widens_then_descends_to_the_most_promising_child() -> None:
    root = make_node(0, None, ms=2.0)
    assert select(Tree([root]), MCTS, random.Random(0)).node_id == "n0"
    one = [root, make_node(1, 0, status=Status.BUILD_ERROR)]
    assert select(Tree(one), MCTS, random.Random(0)).node_id == "n0"  # N=2 allows 2 children
    two = one + [make_node(2, 0, ms=1.0)]
    selection = select(Tree(two), MCTS, random.Random(0))
    assert (selection.node_id, selection.action) == ("n2", "plan")
    assert selection.reason.startswith("mcts: UCT path n0 > n2; expand n2 (1 ms)")


def test_uct_ties_go_to_the_earliest_child_and_failing_leaves_are_debugged() -> None:
    nodes = [
        make_node(0, None, ms=2.0),
        make_node(1, 0, status=Status.BUILD_ERROR),
        make_node(2, 0, status=Status.TIMEOUT),
    ]
    selection = select(Tree(nodes), MCTS, random.Random(0))
    assert (selection.node_id, selection.action) == ("n1", "debug")


def test_exploration_constant_trades_value_for_visits() -> None:
    # n1 holds a good but well-visited subtree; n2 is a single mediocre leaf.
    nodes = [make_node(0, None, ms=2.0), make_node(1, 0, ms=1.0)]
    nodes += [make_node(i, 1, ms=1.0) for i in range(3, 9)]
    nodes += [make_node(2, 0, ms=2.5)]
    tree = Tree(nodes)
    # widen 0.3: the root (9 visits) keeps its 2 children, so the choice is n1's value vs n2's novelty.
    exploit = select(tree, PolicyConfig(name="mcts", mcts_c=0.0, mcts_widen=0.3), random.Random(0))
    assert exploit.reason.startswith("mcts: UCT path n0 > n1 > n3; expand n3")
    explore = select(tree, PolicyConfig(name="mcts", mcts_c=3.0, mcts_widen=0.3), random.Random(0))
    assert explore.node_id == "n2"
