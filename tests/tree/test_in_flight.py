"""Selection around attempts in flight: no second repair of one node, no root past its throttle."""

from __future__ import annotations

from stark_mcp.records import Status
from stark_mcp.tree import PolicyConfig, Selection, Tree, crowded, select, select_around, step_rng

from .builders import make_node

EXPLORE = PolicyConfig(eps=1.0)


def pending(node_id: str, action: str) -> Selection:
    return Selection(node_id=node_id, action=action, reason="in flight")


def failing_leaves() -> Tree:
    # n0 (2 ms) -> n1 (bug), n2 (bug), n3 (bug): exploring draws one of three failing leaves
    failing = (make_node(i, 0, status=Status.BUILD_ERROR) for i in (1, 2, 3))
    return Tree([make_node(0, None, ms=2.0), *failing])


def test_with_nothing_in_flight_it_is_the_policy_itself() -> None:
    tree = failing_leaves()
    for step in range(20):
        assert select_around(tree, EXPLORE, 7, step, []) == select(tree, EXPLORE, step_rng(7, step))


def test_a_node_being_repaired_is_not_repaired_twice() -> None:
    tree = failing_leaves()
    for step in range(20):
        first = select_around(tree, EXPLORE, 7, step, [])
        assert first.action == "debug"
        second = select_around(tree, EXPLORE, 7, step, [first])
        assert second.node_id != first.node_id and second.action == "debug"
        assert crowded(tree, EXPLORE, first, [first]) and not crowded(tree, EXPLORE, second, [first])


def test_the_root_throttle_counts_children_in_flight() -> None:
    config = PolicyConfig(eps=0.0, n_root=3)
    tree = Tree([make_node(0, None, ms=2.0), make_node(1, 0, status=Status.BUILD_ERROR)])
    on_root = pending("n0", "plan")
    assert not crowded(tree, config, on_root, [on_root])  # 1 child + 1 in flight < 3
    assert crowded(tree, config, on_root, [on_root, on_root])  # 1 + 2 reaches n_root
    # Two plans on the best non-root node are what exploitation wants: allowed.
    best = Tree([make_node(0, None, ms=2.0), make_node(1, 0, ms=1.0)])
    assert not crowded(best, config, pending("n1", "plan"), [pending("n1", "plan")] * 3)
