"""Hand-built nodes and hypothesis strategies for random run trees."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from stark_mcp.records import Action, Evaluation, Node, Status, TimingStats

BUGS = [Status.BUILD_ERROR, Status.LOAD_ERROR, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.WRONG_OUTPUT]


def evaluation(status: Status, ms: float | None = None) -> Evaluation:
    runtime = None
    if status is Status.PASSED:
        assert ms is not None
        runtime = TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, samples=10)
    return Evaluation(status=status, runtime=runtime)


def make_node(
    seq: int,
    parent: int | None,
    *,
    ms: float | None = None,
    status: Status | None = None,
    source: str | None = None,
    evaluated: bool = True,
) -> Node:
    """Node n<seq>; passed with ``ms`` when given, else ``status`` (default build_error)."""
    if parent is None:
        action = Action.ROOT
    else:
        action = Action.PLAN
    ev = None
    if evaluated:
        if ms is not None:
            ev = evaluation(Status.PASSED, ms)
        else:
            ev = evaluation(status or Status.BUILD_ERROR)
    return Node(
        id=f"n{seq}",
        run_id="r",
        parent_id=None if parent is None else f"n{parent}",
        seq=seq,
        action=action,
        source=source if source is not None else f"kernel number {seq}",
        evaluation=ev,
    )


@st.composite
def trees(draw: st.DrawFn, max_size: int = 24) -> list[Node]:
    """Random valid run trees: random parents (biased toward a few hubs so throttling and dead
    branches happen), random verdicts, runtimes from a small set (ties), repeated sources."""
    size = draw(st.integers(1, max_size))
    root_ms = draw(st.sampled_from([1.0, 2.0, 4.0]))
    nodes = [make_node(0, None, ms=root_ms, source="reference")]
    for seq in range(1, size):
        parent = draw(st.integers(0, seq - 1))
        if draw(st.booleans()):
            parent = min(parent, draw(st.integers(0, 2)))
        outcome = draw(st.sampled_from(["passed", "passed", "bug", "bug", "bug", "pending"]))
        source = draw(st.sampled_from([f"kernel {seq}", "shared kernel", "shared   kernel\n", f"k{seq % 3}"]))
        if outcome == "passed":
            ms = draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 5.0]))
            nodes.append(make_node(seq, parent, ms=ms, source=source))
        elif outcome == "bug":
            nodes.append(make_node(seq, parent, status=draw(st.sampled_from(BUGS)), source=source))
        else:
            nodes.append(make_node(seq, parent, source=source, evaluated=False))
    # Trees must not depend on the order nodes arrive in (the store returns them in any order).
    order = draw(st.permutations(nodes))
    return list(order)


def grow(nodes: list[Node], parent_id: str, outcome_rng: random.Random) -> Node:
    """A new child of ``parent_id`` with a verdict drawn from ``outcome_rng`` (a simulated attempt)."""
    seq = max(n.seq for n in nodes) + 1
    parent = int(parent_id[1:])
    if outcome_rng.random() < 0.5:
        return make_node(seq, parent, ms=outcome_rng.choice([0.5, 1.0, 2.0, 3.0]))
    return make_node(seq, parent, status=outcome_rng.choice(BUGS))
