from __future__ import annotations

import pytest

from stark_mcp.problems import Problem, problem_from_source
from stark_mcp.records import Action, Evaluation, Node, Status, TimingStats
from stark_mcp.tree import Tree

from .samples import CANDIDATE, REFERENCE


def timing(median: float) -> TimingStats:
    return TimingStats(
        median_ms=median, iqr_ms=median / 20, mean_ms=median, min_ms=median * 0.9, max_ms=median * 1.2,
        samples=40
    )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def problem() -> Problem:
    return problem_from_source(REFERENCE, name="scaled_tanh")


@pytest.fixture
def tree() -> Tree:
    """n0 root; n1 passed (child of n0); n2 build error (child of n1); n3 wrong output (child of n1)."""
    root = Node(
        id="n0", seq=0, action=Action.ROOT, source=REFERENCE,
        evaluation=Evaluation(status=Status.PASSED, runtime=timing(2.5), speedups={"eager": 1.0}),
    )
    n1 = Node(
        id="n1", seq=1, parent_id="n0", action=Action.PLAN, source=CANDIDATE,
        plan="## Advice\nReplace tanh and the scaling by one fused loop.\n\n## Scaffold\n```python\nx\n```\n",
        evaluation=Evaluation(
            status=Status.PASSED, runtime=timing(1.25), speedups={"eager": 2.0, "compile_default": 1.5},
            logs={"build": "ninja: building main.o\nlinking scaled_tanh.so"}, flags=["fast-math"],
        ),
    )
    n2 = Node(
        id="n2", seq=2, parent_id="n1", action=Action.PLAN, source=CANDIDATE.replace("double s", "double s,"),
        plan="## Advice\nVectorize the loop.\n\n## Scaffold\n```python\nx\n```\n",
        evaluation=Evaluation(
            status=Status.BUILD_ERROR, reason="compiler", message="the extension failed to build",
            logs={"build": "main.cpp:2:40: error: expected identifier before ')' token"},
        ),
    )
    n3 = Node(
        id="n3", seq=3, parent_id="n1", action=Action.DEBUG, source=CANDIDATE.replace("* s", "* 2.0"),
        plan=n1.plan,
        evaluation=Evaluation(
            status=Status.WRONG_OUTPUT, reason="tolerance", message="output 0 differs from the reference",
            logs={"correctness": "trial 1: rel-norm error 0.31"},
        ),
    )
    return Tree([root, n1, n2, n3])
