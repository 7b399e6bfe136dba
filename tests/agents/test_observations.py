from __future__ import annotations

from stark_mcp.agents import render_observations
from stark_mcp.agents.observations import trim_log
from stark_mcp.records import Action, CorrectnessReport, Evaluation, Node, Status

from .conftest import timing


def node(evaluation: Evaluation | None) -> Node:
    return Node(id="n5", action=Action.PLAN, parent_id="n0", source="", evaluation=evaluation)


def test_unevaluated_node() -> None:
    assert render_observations(node(None)) == "Not evaluated yet."


def test_build_failure_shows_the_compiler_log_first() -> None:
    text = render_observations(node(Evaluation(
        status=Status.BUILD_ERROR, reason="compiler", message="build failed",
        logs={"build": "cuda.cu(12): error: identifier \"tid\" is undefined"},
    )))
    compiler, execution = text.split("Execution result:")
    assert "build log:" in compiler and 'identifier "tid" is undefined' in compiler
    assert "- status: build_error (compiler)" in execution and "- message: build failed" in execution


def test_build_failure_without_log_says_so() -> None:
    text = render_observations(node(Evaluation(status=Status.BUILD_ERROR, message="ninja exited with 1")))
    assert "no compiler log was kept" in text and "ninja exited with 1" in text


def test_passed_node_shows_runtime_speedups_correctness_and_run_logs() -> None:
    text = render_observations(node(Evaluation(
        status=Status.PASSED, runtime=timing(0.5), speedups={"eager": 3.0},
        baselines={"eager": timing(1.5)}, flags=["unjoined-stream"], own_kernel_share=0.875,
        correctness=CorrectnessReport(trials=3, trials_passed=3, rel_norm_error=2.5e-7, tolerance=1e-5),
        logs={"timing": "warm-up 10 calls"},
    )))
    assert "Built and loaded without errors." in text
    for expected in (
        "- runtime: median 0.5 ms (IQR 0.025 ms, min 0.45 ms, 40 samples)",
        "- baseline eager: median 1.5 ms",
        "- speedup over eager: 3x",
        "- correctness: 3/3 trials passed, relative error 2.50e-07 (tolerance 1.0e-05)",
        "own kernels: 88%",
        "- flags: unjoined-stream",
        "timing log:\n```text\nwarm-up 10 calls\n```",
    ):
        assert expected in text, expected


def test_multiline_message_is_indented_under_its_item() -> None:
    text = render_observations(node(Evaluation(status=Status.RUNTIME_ERROR, message="boom\nat line 3")))
    assert "- message: boom\n  at line 3" in text


def test_trim_log_keeps_head_and_tail() -> None:
    log = "\n".join(f"line {i}" for i in range(200))
    trimmed = trim_log(log, max_lines=10, head=4).splitlines()
    assert trimmed[:4] == ["line 0", "line 1", "line 2", "line 3"]
    assert trimmed[4] == "... [190 lines omitted] ..."
    assert trimmed[-1] == "line 199" and len(trimmed) == 11
    long_line = trim_log("x" * 1000)
    assert len(long_line) < 350 and long_line.endswith("chars cut]")
