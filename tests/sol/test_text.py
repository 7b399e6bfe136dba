"""How the speed of light reads to the planner (execution results), in the leaderboard and in show."""

from __future__ import annotations

from stark_mcp.agents.observations import execution_result
from stark_mcp.orchestrator.report import render_leaderboard, render_node
from stark_mcp.records import Action, Evaluation, Node, Status, TimingStats
from stark_mcp.sol.model import Peaks
from stark_mcp.sol.roofline import shape_floor, sol_report

H200 = Peaks(device_name="NVIDIA H200", bandwidth_bytes_per_s=4.3e12, fp32_flops_per_s=60e12,
             tensor_flops_per_s=790e12, cache_bytes=50 << 20, obtained_at="2026-11-28T21:00:00Z")
COUNTS = {"label": "default", "input_bytes": 256 << 20, "param_bytes": 0, "output_bytes": 256 << 20,
          "flops": {"pointwise": float(64 << 20)}, "dtypes": ["float32"]}


def _evaluation(time_ms: float) -> Evaluation:
    stats = TimingStats(median_ms=time_ms, iqr_ms=0.0, mean_ms=time_ms, min_ms=time_ms, max_ms=time_ms,
                        samples=5)
    return Evaluation(status=Status.PASSED, runtime=stats, speedups={"eager": 2.0},
                      sol=sol_report([COUNTS], H200, {"default": time_ms}))


def _node(node_id: str, evaluation: Evaluation, parent: str | None = "n0", seq: int = 1) -> Node:
    action = Action.ROOT if parent is None else Action.PLAN
    return Node(id=node_id, run_id="r", seq=seq, parent_id=parent, action=action, source=f"x = {seq!r}",
                evaluation=evaluation)


def test_the_planner_reads_the_fraction_the_bound_and_the_floor() -> None:
    floor = shape_floor(COUNTS, H200).floor_ms
    text = execution_result(_evaluation(floor / 0.31))
    assert "- speed of light: this attempt is at 31% of the memory roofline (3.23x headroom)" in text
    assert f"the floor is {floor:.3g} ms" in text
    assert "4.3 TB/s, FP32 60 TFLOP/s, tensor 790 TFLOP/s (measured 2026-11-28T21:00:00Z)" in text


def test_a_time_beyond_the_reference_roofline_is_called_out_for_a_reader() -> None:
    floor = shape_floor(COUNTS, H200)
    between = (floor.floor_ms + floor.output_write_ms) / 2
    text = execution_result(_evaluation(between))
    assert "faster than the reference's computation allows" in text and "exact" in text


def test_the_leaderboard_and_show_put_each_attempt_next_to_the_floor() -> None:
    floor = shape_floor(COUNTS, H200).floor_ms
    root = _node("n0", _evaluation(floor / 0.12), parent=None, seq=0)
    best, other = _node("n1", _evaluation(floor / 0.64)), _node("n2", _evaluation(floor / 0.5), seq=2)
    board = render_leaderboard([root, best, other])
    lines = board.splitlines()
    assert "64% of SOL" in lines[1] and "n1" in lines[1] and "50% of SOL" in lines[2]
    assert lines[-1].startswith("speed of light: the best attempt (n1) is at 64% of the memory roofline")
    assert "speed of light: node n1 is at 64%" in render_node(best)
