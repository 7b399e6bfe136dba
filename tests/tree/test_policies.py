import random

import pytest
from pydantic import ValidationError

from stark_mcp.records import Status
from stark_mcp.tree import PolicyConfig, Tree, eligible, is_dead, select, step_rng
from stark_mcp.tree.eligibility import action_for

from .builders import make_node

STARK_EXPLOIT = PolicyConfig(eps=0.0)
STARK_EXPLORE = PolicyConfig(eps=1.0)


def small_tree() -> Tree:
    # n0 (2 ms) -> n1 (1.5 ms) -> n3 (1 ms), n4 (bug); n0 -> n2 (bug)
    return Tree(
        [
            make_node(0, None, ms=2.0),
            make_node(1, 0, ms=1.5),
            make_node(2, 0, status=Status.RUNTIME_ERROR),
            make_node(3, 1, ms=1.0),
            make_node(4, 1, status=Status.WRONG_OUTPUT),
        ]
    )


def test_exploit_takes_the_fastest_eligible_node_with_plan() -> None:
    selection = select(small_tree(), STARK_EXPLOIT, random.Random(0))
    assert selection.node_id == "n3"
    assert selection.action == "plan"
    assert selection.reason.startswith("exploit: best eligible node n3 (1 ms)")


def test_exploit_draws_exactly_one_number_from_the_rng() -> None:
    rng, twin = random.Random(5), random.Random(5)
    select(small_tree(), STARK_EXPLOIT, rng)
    twin.random()
    assert rng.getstate() == twin.getstate()


def test_explore_takes_a_random_leaf_failing_ones_included() -> None:
    tree = small_tree()
    leaves = ["n2", "n3", "n4"]
    seen = set()
    for seed in range(40):
        selection = select(tree, STARK_EXPLORE, random.Random(seed))
        twin = random.Random(seed)
        twin.random()
        assert selection.node_id == twin.choice(leaves)
        assert selection.action == ("plan" if selection.node_id == "n3" else "debug")
        assert selection.reason.startswith("explore (eps=1.0): random expandable leaf")
        seen.add(selection.node_id)
    assert seen == set(leaves)


def test_eps_threshold_is_a_strict_draw() -> None:
    # rng.random() < eps explores; the draw for Random(1) is ~0.134.
    draw = random.Random(1).random()
    assert select(small_tree(), PolicyConfig(eps=draw), random.Random(1)).reason.startswith("exploit")
    assert select(small_tree(), PolicyConfig(eps=draw + 1e-9), random.Random(1)).reason.startswith("explore")


def test_root_is_throttled_after_n_root_children() -> None:
    four = [make_node(0, None, ms=2.0)] + [make_node(i, 0, status=Status.BUILD_ERROR) for i in range(1, 5)]
    selection = select(Tree(four), STARK_EXPLOIT, random.Random(0))
    assert (selection.node_id, selection.action) == ("n0", "plan")

    five = four + [make_node(5, 0, status=Status.BUILD_ERROR)]
    tree = Tree(five)
    assert "n0" not in [n.id for n in eligible(tree, STARK_EXPLOIT)]
    selection = select(tree, STARK_EXPLOIT, random.Random(0))
    # All children fail (score +inf): the earliest one is debugged.
    assert (selection.node_id, selection.action) == ("n1", "debug")
    assert select(tree, PolicyConfig(eps=0.0, n_root=6), random.Random(0)).node_id == "n0"


def test_dead_branch_needs_more_than_n_child_children_all_failed() -> None:
    base = [make_node(0, None, ms=2.0), make_node(1, 0, ms=1.0)]
    three_failed = base + [make_node(i, 1, status=Status.TIMEOUT) for i in range(2, 5)]
    tree = Tree(three_failed)
    assert not is_dead(tree, tree.get("n1"), 3)
    assert select(tree, STARK_EXPLOIT, random.Random(0)).node_id == "n1"

    four_failed = three_failed + [make_node(5, 1, status=Status.LOAD_ERROR)]
    tree = Tree(four_failed)
    assert is_dead(tree, tree.get("n1"), 3)
    assert "n1" not in [n.id for n in eligible(tree, STARK_EXPLOIT)]
    assert select(tree, STARK_EXPLOIT, random.Random(0)).node_id == "n0"
    assert not is_dead(tree, tree.get("n1"), 4)

    one_passes = three_failed + [make_node(5, 1, ms=3.0)]
    tree = Tree(one_passes)
    assert not is_dead(tree, tree.get("n1"), 3)

    # A child still waiting for its verdict has not failed.
    one_pending = three_failed + [make_node(5, 1, evaluated=False)]
    tree = Tree(one_pending)
    assert not is_dead(tree, tree.get("n1"), 3)


def test_root_is_never_debugged_even_if_its_evaluation_failed() -> None:
    tree = Tree([make_node(0, None, status=Status.RUNTIME_ERROR)])
    assert action_for(tree, tree.root) == "plan"
    assert select(tree, STARK_EXPLOIT, random.Random(0)).action == "plan"


def test_unevaluated_nodes_score_infinity_and_are_planned() -> None:
    tree = Tree([make_node(0, None, ms=2.0), make_node(1, 0, evaluated=False)])
    selection = select(tree, PolicyConfig(eps=0.0, n_root=1), random.Random(0))
    assert (selection.node_id, selection.action) == ("n1", "plan")
    assert "not evaluated" in selection.reason


def test_greedy_does_not_throttle_the_root_but_prunes_dead_branches() -> None:
    nodes = [make_node(0, None, ms=2.0)] + [make_node(i, 0, status=Status.BUILD_ERROR) for i in range(1, 8)]
    tree = Tree(nodes)
    greedy = PolicyConfig(name="greedy")
    selection = select(tree, greedy, random.Random(0))
    assert (selection.node_id, selection.action) == ("n0", "plan")
    assert selection.reason == "greedy: best node n0 (2 ms)"

    nodes = [make_node(0, None, ms=2.0), make_node(1, 0, ms=1.0)]
    nodes += [make_node(i, 1, status=Status.BUILD_ERROR) for i in range(2, 6)]
    tree = Tree(nodes)
    assert select(tree, greedy, random.Random(0)).node_id == "n0"
    # greedy ignores eps and never touches the rng.
    rng = random.Random(3)
    state = rng.getstate()
    select(tree, PolicyConfig(name="greedy", eps=1.0), rng)
    assert rng.getstate() == state


def test_sampling_always_expands_the_root() -> None:
    tree = small_tree()
    selection = select(tree, PolicyConfig(name="sampling"), random.Random(0))
    assert (selection.node_id, selection.action) == ("n0", "plan")
    assert [n.id for n in eligible(tree, PolicyConfig(name="sampling"))] == ["n0"]


def test_reflexion_refines_or_repairs_the_latest_attempt() -> None:
    tree = small_tree()
    selection = select(tree, PolicyConfig(name="reflexion"), random.Random(0))
    assert (selection.node_id, selection.action) == ("n4", "debug")
    assert "repair the latest attempt n4 (failing: wrong_output)" in selection.reason
    grown = Tree(list(tree) + [make_node(5, 4, ms=0.9)])
    selection = select(grown, PolicyConfig(name="reflexion"), random.Random(0))
    assert (selection.node_id, selection.action) == ("n5", "plan")
    only_root = Tree([make_node(0, None, ms=2.0)])
    assert select(only_root, PolicyConfig(name="reflexion"), random.Random(0)).node_id == "n0"


def test_config_rejects_values_that_break_the_policy() -> None:
    with pytest.raises(ValidationError):
        PolicyConfig(n_root=0)
    with pytest.raises(ValidationError):
        PolicyConfig(eps=1.5)
    with pytest.raises(ValidationError):
        PolicyConfig(name="beam")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        PolicyConfig(window_cap=-1)
    config = PolicyConfig()
    with pytest.raises(ValidationError):
        config.eps = 0.5  # type: ignore[misc]


def test_step_rng_is_a_pure_function_of_seed_and_step() -> None:
    assert step_rng(7, 3).random() == step_rng(7, 3).random() == random.Random("7:3").random()
    assert step_rng(7, 3).random() != step_rng(7, 4).random()
    assert step_rng(7, 3).random() != step_rng(8, 3).random()
