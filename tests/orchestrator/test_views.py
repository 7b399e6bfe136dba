"""Pure pieces: limit checks, event text, the progress state, and the text views of a run."""

from __future__ import annotations

import time

import pytest

from stark_mcp.orchestrator.display import DisplayState
from stark_mcp.orchestrator.events import SearchEvent, describe_event
from stark_mcp.orchestrator.limits import Limits, limit_reached
from stark_mcp.orchestrator.report import render_exchanges, render_leaderboard, render_node, render_tree
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Evaluation, ExchangeRecord, Node, RunRecord, Status, TimingStats, Usage

from .replies import CRASH, FIXED, FUSED, PROBLEM, plan_reply

pytestmark = pytest.mark.anyio


def _timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=ms / 10, mean_ms=ms, min_ms=ms, max_ms=ms, samples=5)


def _passed(ms: float, eager: float = 2.0) -> Evaluation:
    return Evaluation(status=Status.PASSED, runtime=_timing(ms), speedups={"eager": eager / ms})


def test_limit_reached_names_the_first_limit_that_forbids_another_expansion() -> None:
    counts = {"recorded": 2, "elapsed_s": 10.0, "cost_usd": 0.5, "consecutive_failures": 0}
    assert limit_reached(Limits(), **counts) is None
    assert limit_reached(Limits(max_attempts=2), **counts) == "max_attempts"
    assert limit_reached(Limits(max_attempts=3, max_wall_s=10.0), **counts) == "max_wall"
    assert limit_reached(Limits(max_wall_s=11.0, max_cost_usd=0.5), **counts) == "max_cost"
    assert limit_reached(Limits(max_cost_usd=0.6), **counts) is None
    assert limit_reached(Limits(max_consecutive_failures=2),
        **{**counts, "consecutive_failures": 2}) == "failures"
    with pytest.raises(ValueError):
        Limits(max_wall_s=0)


def _event(kind: str, **fields: object) -> SearchEvent:
    base: dict[str, object] = {"run_id": "r-1", "attempt": 3, "budget": 30, "target": 30}
    return SearchEvent(kind=kind, **{**base, **fields})  # type: ignore[arg-type]


def test_progress_state_follows_the_events() -> None:
    state = DisplayState().apply(_event("started"))
    assert state.status_line().startswith("attempt 3/30 | best vs eager none yet | last -")
    state = state.apply(_event(
        "recorded", attempt=4, node_id="n4", parent_id="n1", action="plan", verdict="passed", speedup=1.5,
        best_node_id="n4", best_speedup=1.5, tokens=12345, cost_usd=0.25,
    ))
    line = state.status_line()
    assert "attempt 4/30" in line and "best vs eager 1.50x (n4)" in line and "last n4 passed 1.50x" in line
    assert "12,345 tokens $0.2500" in line
    state = state.apply(_event("failed", attempt=4, node_id="n2", message="the debug agent gave up"))
    assert "no attempt from n2" in state.status_line() and "gave up" in state.activity


def test_describe_event_names_the_attempt_of_the_target() -> None:
    selected = _event("selected", step=3, node_id="n2", action="debug")
    assert describe_event(selected) == "attempt 3/30: expanding n2 with debug (step 3)"
    assert "stopped (max_cost)" in describe_event(_event("stopped", stop_reason="max_cost"))


def _nodes() -> list[Node]:
    plan = plan_reply(PROBLEM)
    return [
        Node(id="n0", seq=0, action=Action.ROOT, source=PROBLEM, evaluation=_passed(2.0)),
        Node(id="n1", seq=1, parent_id="n0", action=Action.PLAN, source=CRASH, plan=plan, adherence=0.5,
             evaluation=Evaluation(status=Status.RUNTIME_ERROR, reason="exception",
                                   message="AttributeError: no offset",
                                   logs={"correctness": "Traceback ..."})),
        Node(id="n2", seq=2, parent_id="n1", action=Action.DEBUG, source=FIXED, plan=plan,
             evaluation=_passed(1.0), usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.01, calls=1)),
        Node(id="n3", seq=3, parent_id="n0", action=Action.PLAN, source=FUSED, plan=plan, adherence=1.0,
             evaluation=_passed(0.5)),
    ]


def _run() -> RunRecord:
    now = time.time()
    return RunRecord(
        id="r-1", name="scaled_relu", problem=problem_from_source(PROBLEM, name="scaled_relu"), device="cpu",
        strategy="stark", policy={"name": "stark"}, budget=30, seed=1, baselines={"eager": _timing(2.0)},
        status="finished", created_at=now, updated_at=now,
    )


def test_tree_view_indents_children_under_their_parent() -> None:
    text = render_tree(_run(), _nodes())
    lines = text.splitlines()
    assert lines[0].startswith("run r-1 (scaled_relu) on cpu in cpp: strategy stark, policy stark, budget 30")
    body = lines[lines.index(next(line for line in lines if line.startswith("node"))) + 1:]
    assert [line.split()[0:3] for line in body] == [
        ["n0", "root", "passed"], ["├──", "n1", "plan"], ["│", "└──", "n2"], ["└──", "n3", "plan"],
    ]
    assert "runtime_error (exception)" in body[1] and body[1].rstrip().endswith("0.50")
    assert "1 ms" in body[2] and "2.00x" in body[2]
    assert "0.5 ms" in body[3] and "4.00x" in body[3] and body[3].rstrip().endswith("1.00")


def test_leaderboard_node_and_exchange_views() -> None:
    board = render_leaderboard(_nodes())
    lines = board.splitlines()
    assert lines[1].split()[:2] == ["1.", "n3"] and lines[2].split()[:2] == ["2.", "n2"]
    assert render_leaderboard(_nodes()[:2]) == "leaderboard: no correct attempt yet"
    detail = render_node(_nodes()[1])
    assert "node n1 (plan of n0)" in detail and "AttributeError: no offset" in detail
    assert "--- plan ---" in detail and "--- correctness log ---" in detail and "self.offset" in detail
    exchange = ExchangeRecord(
        id=7, run_id="r-1", node_id=None, role="plan", model="scripted",
        request={"system": "SYSTEM", "prefix": "PREFIX", "body": "BODY"}, reply="REPLY",
        error="the scaffold has no anchors", created_at=time.time(),
    )
    text = render_exchanges([exchange])
    assert "exchange 7: plan agent, scripted, no node" in text
    assert "rejected: the scaffold has no anchors" in text
    assert "BODY" in text and "REPLY" in text and "SYSTEM" not in text
    assert "SYSTEM" in render_exchanges([exchange], full=True)
    assert render_exchanges([]) == "no exchanges recorded"


def test_show_and_the_leaderboard_print_the_eager_time_each_speedup_was_computed_from() -> None:
    # The run's eager figure (timed when it was made) is not what the attempts' speedups divide:
    # each attempt's eager was re-timed beside it. Every printed speedup must follow from the
    # eager time printed beside it.
    from stark_mcp.orchestrator.reads import LeaderboardEntry

    def beside(ms: float, eager: float) -> Evaluation:
        return Evaluation(status=Status.PASSED, runtime=_timing(ms), baselines={"eager": _timing(eager)},
                          speedups={"eager": eager / ms})

    nodes = [
        Node(id="n0", seq=0, action=Action.ROOT, source=PROBLEM, evaluation=beside(2.0, 2.0)),
        Node(id="n1", seq=1, parent_id="n0", action=Action.PLAN, source=FUSED, evaluation=beside(0.8, 2.6)),
        Node(id="n2", seq=2, parent_id="n0", action=Action.PLAN, source=FIXED, evaluation=beside(1.25, 1.7)),
    ]
    run = _run()  # its eager: 2.0 ms, which neither attempt's speedup used
    tree = render_tree(run, nodes).splitlines()
    assert tree[2].startswith("each speedup is over the baseline timed beside that attempt")
    rows = {line.split()[1]: line for line in tree if line.split()[1:2] in (["n1"], ["n2"])}
    assert len(rows) == 2
    for line in rows.values():
        runtime, eager, speedup = line.split("passed")[1].replace("ms", "").split()[:3]
        assert float(speedup.rstrip("x")) == pytest.approx(float(eager) / float(runtime), abs=0.006), line
    assert "2.6 ms" in rows["n1"] and "3.25x" in rows["n1"]
    board = render_leaderboard(nodes).splitlines()
    assert "eager 3.25x (over 2.6 ms)" in board[1] and "eager 1.36x (over 1.7 ms)" in board[2]
    assert "3.25x vs eager (eager 2.6 ms, timed beside it)" in render_node(nodes[1])
    entry = LeaderboardEntry.of(nodes[1])
    assert entry.speedups["eager"] == pytest.approx(entry.baseline_ms["eager"] / entry.runtime_ms)
