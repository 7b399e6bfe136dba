import random

import pytest

from stark_mcp.records import Status
from stark_mcp.tree import Tree, TreeError, context_window, recent_window

from .builders import make_node


def window_tree() -> Tree:
    # n0 ─┬─ n1 (1.0) ─┬─ n3 (0.8)
    #     │            └─ n4 (bug)
    #     ├─ n2 (1.2) ─┬─ n5 (bug) ── n8 (0.7)
    #     │            └─ n6 (0.9)
    #     └─ n7 (bug)
    return Tree(
        [
            make_node(0, None, ms=2.0),
            make_node(1, 0, ms=1.0),
            make_node(2, 0, ms=1.2),
            make_node(3, 1, ms=0.8),
            make_node(4, 1, status=Status.BUILD_ERROR),
            make_node(5, 2, status=Status.WRONG_OUTPUT),
            make_node(6, 2, ms=0.9),
            make_node(7, 0, status=Status.TIMEOUT),
            make_node(8, 5, ms=0.7),
        ]
    )


def window(node_id: str, role: str, **kw: int) -> list[str]:
    return context_window(window_tree(), node_id, role, random.Random(0), **kw)  # type: ignore[arg-type]


def test_plan_sees_children_and_the_leaderboard_outside_its_subtree() -> None:
    # D(n1) = n3, n4; fastest outside {n1, n3, n4}: n8 (0.7), n6 (0.9); n2 (1.2) is third.
    assert window("n1", "plan") == ["n3", "n4", "n6", "n8"]
    assert window("n1", "plan", top_r=3) == ["n2", "n3", "n4", "n6", "n8"]
    assert window("n1", "plan", top_r=0) == ["n3", "n4"]
    # n2's subtree holds n5, n6, n8, so its leaderboard is n3 then n1.
    assert window("n2", "plan") == ["n1", "n3", "n5", "n6"]
    # The whole tree is the root's subtree: only its children.
    assert window("n0", "plan") == ["n1", "n2", "n7"]


def test_code_sees_children_and_the_children_of_siblings() -> None:
    assert window("n1", "code") == ["n3", "n4", "n5", "n6"]
    assert window("n5", "code") == ["n8"]  # sibling n6 has no children
    assert window("n3", "code") == []
    assert window("n0", "code") == ["n1", "n2", "n7"]


def test_debug_sees_siblings_only() -> None:
    assert window("n5", "debug") == ["n6"]
    assert window("n1", "debug") == ["n2", "n7"]
    assert window("n8", "debug") == []
    assert window("n0", "debug") == []


def test_cap_samples_with_the_rng_and_keeps_seq_order() -> None:
    full = ["n3", "n4", "n5", "n6"]
    samples = set()
    for seed in range(30):
        ids = context_window(window_tree(), "n1", "code", random.Random(seed), cap=2)
        expected = sorted(random.Random(seed).sample(full, 2), key=lambda i: int(i[1:]))
        assert ids == expected
        samples.add(tuple(ids))
    assert len(samples) > 1
    assert window("n1", "code", cap=0) == []
    with pytest.raises(TreeError, match="cap must be >= 0"):
        window("n1", "code", cap=-1)


def test_rng_is_untouched_when_nothing_is_dropped() -> None:
    rng = random.Random(9)
    state = rng.getstate()
    context_window(window_tree(), "n1", "code", rng, cap=4)
    assert rng.getstate() == state


def test_unknown_node_or_role() -> None:
    with pytest.raises(TreeError, match="no node 'n42'"):
        window("n42", "plan")
    with pytest.raises(TreeError, match="unknown role 'review'"):
        window("n1", "review")


def test_the_fixed_window_of_the_no_windows_ablation_is_the_latest_attempts_for_any_node() -> None:
    tree = window_tree()
    others = [n.id for n in tree if n.id not in ("n0", "n3")]
    assert recent_window(tree, "n3", cap=3) == others[-3:]
    assert recent_window(tree, "n3", cap=100) == others
    assert recent_window(tree, "n3", cap=0) == []
    assert recent_window(tree, "n0", cap=2) == [n.id for n in tree][-2:]
    with pytest.raises(TreeError):
        recent_window(tree, "n99")
    with pytest.raises(TreeError, match="cap must be >= 0"):
        recent_window(tree, "n3", cap=-1)
