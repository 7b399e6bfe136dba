"""``stark-mcp eval`` through a real subprocess: JSON shape and exit codes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.evaluator.conftest import FIXTURES

# The real entry point, as the console script runs it.
DRIVER = "import sys; from stark_mcp.cli import main; main(sys.argv[1:])"


def run_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STARK_HOME": str(home)}
    return subprocess.run([sys.executable, "-c", DRIVER, "eval", *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=FIXTURES.parents[2])


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_json_verdict_and_exit_code_zero(tmp_path) -> None:
    done = run_cli(str(FIXTURES / "relu_sum.py"), str(FIXTURES / "torch_ok.py"), "--device", "cpu",
                   "--json", "--baselines", "eager", home=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "passed" and data["reason"] is None
    assert data["runtime"]["unit"] == "ms" and data["runtime"]["samples"] >= 30
    assert set(data["baselines"]) == {"eager"} and data["speedups"]["eager"] > 0
    assert data["correctness"]["allclose_1e2"] is True and isinstance(data["flags"], list)
    phases, wall = data["phase_seconds"], data["wall_seconds"]
    assert {"queue", "process_start", "load", "correctness", "timing", "teardown"} <= set(phases)
    assert abs(sum(phases.values()) - wall) <= 0.05 * wall and phases["other"] <= 0.05 * wall, phases
    assert (tmp_path / "cache" / "results").is_dir()
    trust = data["trust"]
    assert trust["isolation"] in ("sandbox", "uid", "process")
    assert trust["calls"] >= trust["checked_calls"] > 0 and trust["external_ms"] > 0

    # The same verdict for a person, from the cache: what the trusted side checked comes with it.
    human = run_cli(str(FIXTURES / "relu_sum.py"), str(FIXTURES / "torch_ok.py"), "--device", "cpu",
                    "--baselines", "eager", home=tmp_path)
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith("passed") and "(cached result)" in human.stdout
    assert f"isolation: {trust['isolation']}" in human.stdout
    assert f"checked: {trust['checked_calls']}/{trust['calls']} calls" in human.stdout
    assert "clocks: candidate reported" in human.stdout and "trusted bound" in human.stdout


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_a_wrong_candidate_exits_one_with_its_verdict_in_the_json(tmp_path) -> None:
    done = run_cli(str(FIXTURES / "relu_sum.py"), str(FIXTURES / "wrong_shape.py"), "--device", "cpu",
                   "--json", "--baselines", "eager", home=tmp_path)
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert (data["status"], data["reason"]) == ("wrong_output", "shape")


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
@pytest.mark.parametrize(("candidate", "verdict"), [
    ("syntax_error.py", "load_error (syntax): syntax error at line 8"),
    ("raises.py", "runtime_error"),
])
def test_a_candidate_that_does_not_run_exits_three(tmp_path, candidate, verdict) -> None:
    done = run_cli(str(FIXTURES / "relu_sum.py"), str(FIXTURES / candidate), "--device", "cpu",
                   "--baselines", "eager", home=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith(verdict)


def test_every_verdict_has_a_documented_exit_code() -> None:
    from stark_mcp.cli.eval_cmd import EXIT_CODES
    from stark_mcp.records import Status

    assert set(EXIT_CODES) == {s.value for s in Status}
    assert [s for s, code in EXIT_CODES.items() if code == 0] == ["passed"]
    running = (Path(__file__).resolve().parents[2] / "docs" / "running.md").read_text()
    for status, code in EXIT_CODES.items():
        assert f"{code}: " in running and status in running


def test_a_problem_path_that_is_no_problem_is_named_not_quoted(tmp_path) -> None:
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    done = run_cli(str(secret), str(FIXTURES / "torch_ok.py"), "--device", "cpu", home=tmp_path)
    assert done.returncode == 2 and "not a problem file" in done.stderr
    assert "root:x" not in done.stdout + done.stderr
    done = run_cli(str(FIXTURES / "relu_sum.py"), str(secret), "--device", "cpu", home=tmp_path)
    assert done.returncode == 2 and "not a candidate file" in done.stderr
    assert "root:x" not in done.stdout + done.stderr


@pytest.mark.parametrize("args,needle", [
    (["missing_problem.py", "torch_ok.py"], "no such problem file"),
    (["relu_sum.py", "no_such_candidate.py"], "cannot read candidate"),
    (["relu_sum.py", "torch_ok.py", "--baselines", "eager,warp_speed"], "unknown baseline"),
    (["relu_sum.py", "torch_ok.py", "--device", "tpu"], "--device must be"),
    (["problem_inputs_raise.py", "torch_ok.py", "--device", "cpu", "--baselines", "eager"],
        "no inputs today"),
])
def test_bad_arguments_exit_non_zero_with_a_message(tmp_path, args, needle) -> None:
    resolved = [str(FIXTURES / a) if a.endswith(".py") else a for a in args]
    done = run_cli(*resolved, home=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "error:" in done.stderr and needle in done.stderr



def test_several_input_sets_are_reported_one_by_one() -> None:
    # The evaluation itself is exercised on two shapes by the adversarial suite and the MCP flow;
    # --json prints the whole Evaluation, so only the human summary has something to add.
    from stark_mcp.cli.eval_cmd import summary
    from stark_mcp.records import Evaluation, ShapeResult, Status, TimingStats

    def stats(ms: float) -> TimingStats:
        return TimingStats(median_ms=ms, iqr_ms=0.01, mean_ms=ms, min_ms=ms, max_ms=ms, samples=30)

    shapes = [ShapeResult(label="rows=8,cols=64", runtime=stats(0.5), speedups={"eager": 2.0}),
              ShapeResult(label="rows=8,cols=128", runtime=stats(2.0), speedups={"eager": 0.5})]
    evaluation = Evaluation(status=Status.PASSED, runtime=stats(1.0), baselines={"eager": stats(1.0)},
                            speedups={"eager": 1.0}, shapes=shapes)
    lines = summary(evaluation).splitlines()
    start = lines.index("input sets (2; the runtime and speedups above are their geometric mean):")
    assert lines[start + 1:] == ["  rows=8,cols=64: 0.5 ms, speedup eager 2x",
                                 "  rows=8,cols=128: 2 ms, speedup eager 0.5x"]
    one = Evaluation(status=Status.PASSED, runtime=stats(1.0), shapes=shapes[:1])
    assert "input sets" not in summary(one)


def test_eval_starts_the_zygote_before_its_own_start_up_work(tmp_path, monkeypatch) -> None:
    """The zygote's import of torch (seconds) is what a fresh ``eval``'s first evaluation waits for:
    the command starts it first, so it runs beside the command's imports and the problem's load."""
    import signal

    from typer.testing import CliRunner

    from stark_mcp.cli import app
    from stark_mcp.evaluator.sandbox import forked
    from stark_mcp.orchestrator import session
    from stark_mcp.problems import ProblemError

    monkeypatch.setenv("STARK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("STARK_EXECUTOR", raising=False)
    monkeypatch.setattr(forked, "_process_zygote", None)  # none yet, as in a fresh process
    seen: list[forked.ZygoteClient | None] = []

    def load_problem(spec: str) -> None:
        started = forked._process_zygote
        seen.append(started[1] if started is not None and started[0] == os.getpid() else None)
        raise ProblemError("stopped once the problem is asked for")

    monkeypatch.setattr(session, "load_problem", load_problem)
    done = CliRunner().invoke(app, ["eval", str(FIXTURES / "relu_sum.py"), str(FIXTURES / "torch_ok.py"),
                                    "--device", "cpu"])
    zygote = seen[0] if seen else None
    try:
        assert done.exit_code == 2 and "stopped once the problem is asked for" in done.output
        assert zygote is not None and zygote.proc is not None  # started by then, importing meanwhile
        assert forked._process_zygote == (os.getpid(), zygote)  # the one the evaluator would fork from
    finally:
        if zygote is not None and zygote.proc is not None:
            os.killpg(zygote.proc.pid, signal.SIGKILL)
            zygote.close()
