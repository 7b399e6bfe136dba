import pytest

from stark_mcp.records import Status
from stark_mcp.tree import Tree, TreeError, leaderboard
from stark_mcp.tree.leaderboard import normalise_source

from .builders import make_node


def test_fastest_correct_non_root_nodes_first_ties_by_seq() -> None:
    tree = Tree(
        [
            make_node(0, None, ms=0.1),  # the root is never on the board, however fast
            make_node(1, 0, ms=2.0),
            make_node(2, 0, ms=1.0),
            make_node(3, 1, ms=1.0),
            make_node(4, 1, status=Status.WRONG_OUTPUT),
            make_node(5, 2, evaluated=False),
            make_node(6, 2, ms=3.0),
        ]
    )
    assert [n.id for n in leaderboard(tree, 2)] == ["n2", "n3"]
    assert [n.id for n in leaderboard(tree, 10)] == ["n2", "n3", "n1", "n6"]
    assert leaderboard(tree, 0) == []
    with pytest.raises(TreeError, match=">= 0"):
        leaderboard(tree, -1)


def test_copies_differing_only_in_whitespace_count_once() -> None:
    tree = Tree(
        [
            make_node(0, None, ms=5.0, source="reference"),
            make_node(1, 0, ms=1.0, source="def f():\n    return 1\n"),
            make_node(2, 0, ms=0.9, source="def f():\n\n  return   1"),
            make_node(3, 1, ms=0.9, source="def f(): return 1"),
            make_node(4, 1, ms=1.1, source="def g():\n    return 1\n"),
        ]
    )
    # n2 and n3 tie at 0.9 ms with the same normalised source: the earlier one stays.
    assert [n.id for n in leaderboard(tree, 5)] == ["n2", "n4"]
    assert normalise_source(" a\n\tb  c \n") == "a b c"


def test_copies_differing_only_in_comments_count_once() -> None:
    body = (
        "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    )
    commented = body.replace("return x * 2", "return x * 2  # fused") + "# tuned by hand\n"
    text = body.replace("x * 2", "'x * 2  # a string, not a comment'")
    tree = Tree(
        [
            make_node(0, None, ms=5.0, source="reference"),
            make_node(1, 0, ms=1.0, source=body),
            make_node(2, 0, ms=1.1, source=commented),
            make_node(3, 0, ms=1.2, source=text),
            make_node(4, 0, ms=1.3, source="def broken(:\n    pass  # no tokens here\n"),
        ]
    )
    assert [n.id for n in leaderboard(tree, 5)] == ["n1", "n3", "n4"]
