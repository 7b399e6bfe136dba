"""``stark-mcp run --resume RUN_ID``, exactly as the interrupted run's hint prints it: the run's
scripted backend and output folder come back from the run's config, from another folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FAST_JSON
from .replies import CLAMPED, FUSED, PROBLEM_PATH, code_reply, write_replies

CLI = [sys.executable, "-m", "stark_mcp"]


def _env(home: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "STARK_"))}
    return {**env, "STARK_HOME": str(home), "STARK_CACHE_DIR": str(cache)}


@pytest.mark.slow
def test_resume_restores_the_scripted_backend_and_the_output_folder(
    tmp_path: Path, eval_cache: Path,
) -> None:
    env = _env(tmp_path / "home", eval_cache)
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir(), elsewhere.mkdir()
    # One reply for a budget of two: the second expansion finds the script used up and the run stops.
    replies = write_replies(start / "replies.json", [("generalist", code_reply(FUSED))])
    first = subprocess.run(
        [*CLI, "run", str(PROBLEM_PATH), "--budget", "2", "--seed", "3", "--strategy", "sampling",
         "--device", "cpu", "--baselines", "eager", "--eval-settings", FAST_JSON,
         "--backend", "scripted:replies.json", "--out", "out", "--max-cost", "7.5"],
        cwd=start, env=env, capture_output=True, text=True, timeout=300,
    )
    summary = json.loads((start / "out" / "summary.json").read_text())
    assert summary["attempts"] == 1, first.stderr[-3000:]
    run_id = summary["run_id"]
    # More replies now: the resumed session replays the file from its start.
    write_replies(replies, [("generalist", code_reply(FUSED)), ("generalist", code_reply(CLAMPED))])
    resumed = subprocess.run([*CLI, "run", "--resume", run_id], cwd=elsewhere, env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "ANTHROPIC" not in resumed.stderr
    summary = json.loads((start / "out" / "summary.json").read_text())
    assert summary["attempts"] == 2 and summary["status"] == "finished"
    assert (start / "out" / "best_kernel.py").exists() and not (elsewhere / "stark-out").exists()


def test_resume_of_an_unknown_run_says_so(tmp_path: Path) -> None:
    done = subprocess.run([*CLI, "run", "--resume", "r-nothere"], env=_env(tmp_path / "h", tmp_path / "c"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no run 'r-nothere'" in done.stderr
