"""The profile table in the planner's prompt, built from profiles recorded on an H100."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.agents import render_prompt
from stark_mcp.agents.profiles import profiled_nodes, render_profile_table
from stark_mcp.evaluator.host import profile_reports
from stark_mcp.problems import Problem
from stark_mcp.records import Evaluation, ProfileReport, Status
from stark_mcp.tree import Tree

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"


def ncu_profile(own: str = "") -> ProfileReport:
    report = profile_reports.from_answer(
        {"source": "ncu", "report": (SAMPLES / "ncu_raw.csv").read_text(), "shape": "default"},
        own or None,
        40,
        9.4,
    )
    assert report.source == "ncu"
    return report


def with_profile(tree: Tree, **reports: ProfileReport) -> Tree:
    nodes = []
    for node in tree:
        report = reports.get(node.id)
        if report is not None:
            assert node.evaluation is not None
            evaluation = node.evaluation.model_copy(update={"profile": report})
            node = node.model_copy(update={"evaluation": evaluation})
        nodes.append(node)
    return Tree(nodes)


def plan_body(problem: Problem, tree: Tree, node_id: str, window: list[str], role: str = "plan") -> str:
    return render_prompt(
        role,
        problem=problem,
        tree=tree,
        node_id=node_id,
        window_ids=window,  # type: ignore[arg-type]
        device="cuda",
    ).body


def test_the_planner_sees_the_nodes_kernels_and_how_to_read_them(problem: Problem, tree: Tree) -> None:
    own = "__global__ void vectorized_elementwise_kernel(float* x) {}"
    tree = with_profile(tree, n1=ncu_profile(own))
    body = plan_body(problem, tree, "n1", ["n2", "n3"])
    latest = body[body.index("## Latest attempt") : body.index("## History")]
    assert "### Profiles: where the device time goes" in latest
    rows = [line for line in latest.splitlines() if line.startswith("| n1 |")]
    assert len(rows) == 2
    gemm, add = rows
    assert "sm80_xmma_gemm" in gemm and "| 16x32 / 256 |" in gemm and "| 254 |" in gemm
    assert "| compute |" in gemm
    assert "vectorized_elementwise_kernel*" in add  # the candidate's own kernel
    assert "| 65536 / 128 |" in add and "| 90 |" in add and "% of DRAM roof" in add and "| memory |" in add
    assert "long_scoreboard 68%" in add
    assert "- n1: Nsight Compute counters, NVIDIA H100 80GB HBM3, 2 kernels" in latest
    for words in (
        "memory-bound",
        "compute-bound",
        "latency-bound",
        "long_scoreboard",
        "occupancy",
        "roofline",
    ):
        assert words in latest, words  # how to read it comes with the table


def test_relatives_are_the_fastest_profiled_passing_nodes(problem: Problem, tree: Tree) -> None:
    listed = [["void relu_kernel(float*)", 40.0]]
    fallback = profile_reports.from_kernels(listed, "ncu is not installed", "default")
    tree = with_profile(tree, n0=fallback, n1=ncu_profile(), n3=ncu_profile())
    # n3 failed: its profile is not a relative's. The root passed (the eager time): it is shown.
    chosen = profiled_nodes(tree.get("n1"), [tree.get(i) for i in ("n0", "n2", "n3")])
    assert [node_id for node_id, _ in chosen] == ["n1", "n0"]
    body = plan_body(problem, tree, "n1", ["n2", "n3"])
    assert "| n0 | relu_kernel | 40 us (100%) | - |" in body
    assert "- n0: torch profiler only: no counters, " in body and "(ncu is not installed)" in body
    # Planning on the root: its own profile, no relatives with profiles.
    root_body = plan_body(problem, tree, "n0", [])
    assert "| n0 | relu_kernel" in root_body and "| n1 |" not in root_body


def test_no_table_without_profiles_and_none_for_the_debugger(problem: Problem, tree: Tree) -> None:
    plain = plan_body(problem, tree, "n1", ["n2"])
    assert "### Profiles" not in plain and "long_scoreboard" not in plain  # no guidance without a table
    profiled = with_profile(tree, n1=ncu_profile())
    debug = plan_body(problem, profiled, "n2", ["n1"], role="debug")
    assert "### Profiles" not in debug
    assert "### Profiles" in plan_body(problem, profiled, "n1", [], role="generalist")
    assert render_profile_table([("n5", profile_reports.unavailable("profiling needs a GPU"))]) == ""


def test_many_kernels_are_summed_into_one_row(problem: Problem) -> None:
    launches = [[f"void k{i}(float*)", float(10 - i)] for i in range(6)]
    report = profile_reports.from_kernels(launches, "", "default")
    table = render_profile_table([("n4", report)])
    assert "| n4 | (3 more kernels) | 40% |" in table  # 7+6+5 of 45 us
    assert table.count("| n4 |") == 4


def test_the_debugger_reads_the_sanitizer_report(problem: Problem, tree: Tree) -> None:
    report = (
        "========= Invalid __global__ write of size 4 bytes\n"
        "=========     by thread (100,0,0) in block (0,0,0)"
    )
    failing = tree.get("n3").model_copy(
        update={
            "evaluation": Evaluation(
                status=Status.RUNTIME_ERROR,
                reason="exception",
                message="forward raised AcceleratorError: CUDA error: "
                "an illegal memory access was encountered",
                logs={"compute-sanitizer": report},
            )
        }
    )
    tree = Tree([n if n.id != "n3" else failing for n in tree])
    body = plan_body(problem, tree, "n3", [], role="debug")
    latest = body[body.index("## Latest attempt") : body.index("## History")]
    assert "compute-sanitizer log:" in latest and "by thread (100,0,0)" in latest
    assert "compute-sanitizer log is shown" in body[body.index("## Instruction") :]


@pytest.mark.parametrize("share,expected", [(0.5, "50%"), (0.004, "0%")])
def test_time_column(share: float, expected: str) -> None:
    listed = [["void a()", 100 * share], ["void b()", 100 * (1 - share)]]
    report = profile_reports.from_kernels(listed, "", "default")
    assert f"({expected})" in render_profile_table([("n1", report)])
