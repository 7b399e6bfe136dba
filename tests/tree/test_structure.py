import pytest

from stark_mcp.records import Action, Node
from stark_mcp.tree import Tree, TreeError

from .builders import make_node


def sample_tree() -> Tree:
    #        n0
    #      /  |  \
    #    n1   n2  n5
    #   / \    |
    #  n3  n4  n6
    nodes = [
        make_node(0, None, ms=2.0),
        make_node(1, 0, ms=1.5),
        make_node(2, 0),
        make_node(3, 1, ms=1.0),
        make_node(4, 1),
        make_node(5, 0, ms=3.0),
        make_node(6, 2, ms=1.2),
    ]
    return Tree(reversed(nodes))


def test_navigation_is_ordered_by_seq_whatever_the_input_order() -> None:
    tree = sample_tree()
    assert tree.root.id == "n0"
    assert [n.id for n in tree] == [f"n{i}" for i in range(7)]
    assert len(tree) == 7
    assert [n.id for n in tree.children("n0")] == ["n1", "n2", "n5"]
    assert [n.id for n in tree.siblings("n2")] == ["n1", "n5"]
    assert tree.siblings("n0") == []
    assert tree.subtree_ids("n1") == {"n1", "n3", "n4"}
    assert tree.subtree_ids("n0") == {f"n{i}" for i in range(7)}
    assert [n.id for n in tree.leaves()] == ["n3", "n4", "n5", "n6"]
    assert tree.latest().id == "n6"
    assert tree.depth("n6") == 2
    assert tree.parent("n6").id == "n2"
    assert "n4" in tree and "n9" not in tree


def test_unknown_node_is_a_tree_error() -> None:
    with pytest.raises(TreeError, match="no node 'n9'"):
        sample_tree().get("n9")
    with pytest.raises(TreeError):
        sample_tree().children("n9")


def test_needs_exactly_one_root() -> None:
    with pytest.raises(TreeError, match="at least its root"):
        Tree([])
    with pytest.raises(TreeError, match="exactly one node with action 'root'; found none"):
        Tree([make_node(1, 0)])
    with pytest.raises(TreeError, match="found n0, n1"):
        Tree([make_node(0, None, ms=1.0), make_node(1, None, ms=1.0)])


def test_root_with_parent_and_orphan_and_missing_parent() -> None:
    root_with_parent = Node(id="n0", parent_id="n1", action=Action.ROOT, source="x")
    with pytest.raises(TreeError, match="must have no parent"):
        Tree([root_with_parent, make_node(1, None, ms=1.0).model_copy(update={"action": Action.PLAN})])
    orphan = make_node(1, 0).model_copy(update={"parent_id": None})
    with pytest.raises(TreeError, match="has no parent but is not the root"):
        Tree([make_node(0, None, ms=1.0), orphan])
    with pytest.raises(TreeError, match="names parent 'n7'"):
        Tree([make_node(0, None, ms=1.0), make_node(1, 7)])


def test_duplicate_ids_and_cycles_are_rejected() -> None:
    with pytest.raises(TreeError, match="duplicate node id 'n1'"):
        Tree([make_node(0, None, ms=1.0), make_node(1, 0), make_node(1, 0)])
    a = make_node(1, 2)
    b = make_node(2, 1)
    with pytest.raises(TreeError, match="n1, n2 do not descend from the root"):
        Tree([make_node(0, None, ms=1.0), a, b])


def test_extending_a_tree_checks_what_the_constructor_checks() -> None:
    base = Tree([make_node(0, None, ms=1.0), make_node(1, 0, ms=0.5)])
    assert base.extended([]) is base
    grown = base.extended([make_node(2, 1), make_node(3, 2, ms=0.4)])
    assert [n.id for n in grown.children("n1")] == ["n2"] and len(base) == 2  # the base is untouched
    with pytest.raises(TreeError, match="not in the tree"):
        base.extended([make_node(2, 7)])
    with pytest.raises(TreeError, match="not newer"):
        grown.extended([make_node(1, 0)])
    with pytest.raises(TreeError, match="exactly one node with action 'root'"):
        base.extended([make_node(2, None)])
