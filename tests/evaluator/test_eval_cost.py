"""What an attempt waits for: ``stark-mcp eval``'s verdict comes before its profile, and the first
evaluation of a new problem times eager only (the compile baselines are named, with how to add them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stark_mcp.config import Settings
from stark_mcp.evaluator import EvalSettings
from stark_mcp.orchestrator.session import evaluate_candidate
from stark_mcp.records import Evaluation, ProfileReport
from tests.evaluator.conftest import FIXTURES

DRIVER = "import sys; from stark_mcp.cli import main; main(sys.argv[1:])"
# the CI machine's bound for a new problem's first `eval` with its default baselines (2 cores)
FIRST_EVAL_S = 30.0


def new_problem(tmp_path: Path) -> Path:
    """relu_sum.py under a hash no cache has seen."""
    path = tmp_path / "fresh_problem.py"
    path.write_text((FIXTURES / "relu_sum.py").read_text() + f"\n# {time.time_ns()}\n")
    return path


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_the_first_eval_of_a_new_problem_times_eager_only_and_says_how_to_add_the_rest(tmp_path) -> None:
    env = {**os.environ, "STARK_HOME": str(tmp_path / "home")}
    problem = new_problem(tmp_path)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "eval", str(problem), str(FIXTURES / "torch_ok.py"),
         "--device", "cpu"],
        capture_output=True, text=True, env=env, timeout=300, cwd=FIXTURES.parents[2],
    )
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("passed"), done.stdout
    assert wall < FIRST_EVAL_S, (wall, done.stderr)
    pending = [n for n in EvalSettings().baselines if n != "eager"]
    assert pending, "the default baselines have compile ones"
    assert f"not timed: {', '.join(pending)}" in done.stdout
    assert f"--baselines eager,{','.join(pending)}" in done.stdout
    # nothing was timed for them behind the verdict either
    assert "baseline " + pending[0] not in done.stderr

    # baselines named on the command line are the ones timed, and nothing is left pending
    asked = subprocess.run(
        [sys.executable, "-c", DRIVER, "eval", str(problem), str(FIXTURES / "torch_ok.py"), "--device", "cpu",
         "--json", "--baselines", "eager"],
        capture_output=True, text=True, env=env, timeout=300, cwd=FIXTURES.parents[2],
    )
    data = json.loads(asked.stdout)
    assert data["status"] == "passed" and not [f for f in data["flags"] if "baseline_" in f]


@pytest.mark.anyio
@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_the_verdict_is_handed_over_before_the_profile_is_taken(tmp_path) -> None:
    events: list[tuple[str, object]] = []

    def on_result(evaluation: Evaluation) -> None:
        events.append(("verdict", evaluation))

    def on_profile(report: ProfileReport) -> None:
        events.append(("profile", report))

    settings = Settings.from_env({"STARK_HOME": str(tmp_path / "home")})
    evaluation = await evaluate_candidate(
        settings, str(FIXTURES / "relu_sum.py"), (FIXTURES / "torch_ok.py").read_text(), device="cpu",
        eval_settings=EvalSettings(baselines=("eager",), min_time_s=0.005, max_time_s=0.3),
        on_result=on_result, on_profile=on_profile, profile=True,
    )
    assert [kind for kind, _ in events] == ["verdict", "profile"]
    verdict = events[0][1]
    assert isinstance(verdict, Evaluation) and verdict.passed and verdict.profile is None
    assert "profile" not in verdict.phase_seconds  # no phase of the verdict is the profile's
    assert evaluation.profile is events[1][1]  # the returned evaluation carries it, taken after

    # without --profile none is taken at all
    events.clear()
    await evaluate_candidate(
        settings, str(FIXTURES / "relu_sum.py"), (FIXTURES / "torch_ok.py").read_text(), device="cpu",
        eval_settings=EvalSettings(baselines=("eager",), min_time_s=0.005, max_time_s=0.3),
        on_result=on_result, on_profile=on_profile,
    )
    assert [kind for kind, _ in events] == ["verdict"]
