"""``stark-mcp run``, ``show`` and ``export`` as a user runs them: real subprocesses, a scripted model."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from .conftest import FAST_JSON
from .replies import CLAMPED, FUSED, PROBLEM_PATH, WHERE, code_reply, write_replies

CLI = [sys.executable, "-m", "stark_mcp"]


def _env(home: Path, cache: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "STARK_"))}
    env["STARK_HOME"] = str(home)
    if cache is not None:
        env["STARK_CACHE_DIR"] = str(cache)
    return env


def _attempts(db: Path, run_id: str | None = None) -> int:
    if not db.exists():
        return 0
    where, args = ("AND run_id = ?", (run_id,)) if run_id else ("", ())
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute(f"SELECT COUNT(*) FROM nodes WHERE action != 'root' {where}",
                args).fetchone()[0]
    except sqlite3.OperationalError:  # the runner is still creating the schema
        return 0


def test_without_a_key_run_says_how_to_set_one_before_any_work(tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *CLI[1:], "run", str(PROBLEM_PATH), "--device", "cpu"],
        env=_env(tmp_path / "home"), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert all(needle in done.stderr for needle in ("ANTHROPIC_API_KEY", "stark-mcp serve", "needs no key"))
    assert done.stdout == ""
    assert not (tmp_path / "home").exists()  # no database, no baselines: it stopped first
    # nor the SDK (about three seconds of imports): the key is looked for first
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "stark_mcp.cli" in imported and not {"anthropic", "torch"} & imported
    assert time.monotonic() - started < 30


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_run_interrupted_with_ctrl_c_then_resumed_writes_kernel_and_summary(tmp_path: Path,
    eval_cache: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = _env(home, eval_cache)
    db = home / "stark.db"
    # Sources unique to this test are evaluated afresh (seconds each), so Ctrl-C lands mid-run.
    sources = [s + f"# sample {uuid.uuid4().hex}\n" for s in (FUSED, CLAMPED, WHERE)]
    first = write_replies(tmp_path / "first.json", [("generalist", code_reply(s)) for s in sources])
    options = [
        "--device", "cpu", "--strategy", "sampling", "--baselines", "eager", "--eval-settings", FAST_JSON,
    ]
    runner = subprocess.Popen(
        [*CLI, "run", str(PROBLEM_PATH), "--budget", "3", "--seed", "4", "--backend", f"scripted:{first}",
         "--out", str(tmp_path / "out1"), *options],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # As from a terminal: SIGINT's default action, whatever this process inherited (a shell's
        # background job, or a runner started from one, ignores it, and Python then keeps ignoring it).
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 120
    while _attempts(db) < 1:
        assert runner.poll() is None, runner.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    runner.send_signal(signal.SIGINT)
    stdout, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 130, stderr
    run_id = json.loads((tmp_path / "out1" / "summary.json").read_text())["run_id"]
    assert f"stark-mcp run --resume {run_id}" in stderr
    done = _attempts(db, run_id)
    assert 1 <= done < 3
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0] == "interrupted"
    assert json.loads((tmp_path / "out1" / "summary.json").read_text())["stop_reason"] == "interrupted"

    rest = write_replies(tmp_path / "rest.json", [("generalist", code_reply(s)) for s in sources[done:]])
    resumed = subprocess.run(
        [*CLI, "run", "--resume", run_id, "--backend", f"scripted:{rest}"],
        cwd=work, env=env, capture_output=True, text=True, timeout=180,
    )
    assert resumed.returncode == 0, resumed.stderr
    # Piped, not a terminal: plain lines, the summary's title first, each progress event on its own line.
    assert resumed.stdout.splitlines()[0] == f"stark-mcp run {run_id}"
    assert f"attempts: 3/3 ({3 - done} this session)" in resumed.stdout.splitlines()
    recorded = [line for line in resumed.stderr.splitlines() if ": recorded n" in line]
    assert len(recorded) == 3 - done and all(line.startswith("attempt ") for line in recorded)
    assert "\x1b[" not in resumed.stderr + resumed.stdout
    out = tmp_path / "out1"  # the run's own --out, restored by --resume
    summary = json.loads((out / "summary.json").read_text())
    assert summary["attempts"] == 3 and summary["stop_reason"] == "budget" and summary["status"] == "finished"
    assert summary["strategy"] == "sampling" and summary["best_node_id"] in ("n1", "n2", "n3")
    kernel = subprocess.run([sys.executable, str(out / "best_kernel.py")], capture_output=True, text=True,
        timeout=120)
    assert kernel.returncode == 0, kernel.stderr
    assert "relative error vs reference" in kernel.stdout

    listed = subprocess.run([*CLI, "runs"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and any(line.startswith(run_id) for line in listed.stdout.splitlines())
    shown = subprocess.run([*CLI, "show", run_id], env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert any(line.startswith("n0 root") for line in lines)
    for node_id in ("n1", "n2", "n3"):
        assert any(f"── {node_id} plan" in line and "passed" in line for line in lines)
    assert "leaderboard" in shown.stdout

    talk = subprocess.run([*CLI, "show", run_id, "--exchanges", "--node", "n2"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert talk.returncode == 0 and "generalist agent" in talk.stdout and sources[1].strip() in talk.stdout

    target = tmp_path / "n1.py"
    # --no-verify: this test is about what a resumed run recorded; re-timing a kernel of this tiny
    # problem on a loaded CI machine can fall outside the verify tolerance (tests/orchestrator/test_verify.py
    # covers export's verification on a problem whose speedup is stable).
    exported = subprocess.run([*CLI, "export", run_id, "--node", "n1", "--out", str(target), "--no-verify"],
                              env=env, capture_output=True, text=True, timeout=60)
    assert exported.returncode == 0, exported.stderr
    assert sources[0].strip() in target.read_text()
    missing = subprocess.run([*CLI, "export", run_id, "--node", "n9", "--out", str(target)], env=env,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no node 'n9'" in missing.stderr


def test_run_refuses_bad_arguments_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from stark_mcp.cli import app

    monkeypatch.setenv("STARK_HOME", str(tmp_path / "home"))
    replies = write_replies(tmp_path / "r.json", [])
    runner = CliRunner()
    cases = {
        ("run", str(PROBLEM_PATH), "--strategy", "beam"): "unknown strategy 'beam'",
        ("run", "--backend", f"scripted:{replies}"): "--resume RUN_ID",
        ("run", str(PROBLEM_PATH), "--device", "tpu"): "--device must be auto, cpu or cuda",
        ("run", str(PROBLEM_PATH), "--eval-settings", "[1]"): "JSON object",
        ("run", str(PROBLEM_PATH), "--backend", "carrier-pigeon"): "unknown LLM backend",
        ("show", "r-nothere"): "no run 'r-nothere'",
    }
    for args, message in cases.items():
        result = runner.invoke(app, list(args))
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
    assert not (tmp_path / "home" / "cache").exists()


@pytest.mark.parametrize("args,message", [
    (["--device", "cpu", "--language", "triton"], "language 'triton' does not run on the cpu device"),
    (["--language", "rust"], "unknown language 'rust'"),
    (["--resume", "r-x", "--language", "cuda"], "--language applies to a new run"),
])
def test_run_refuses_a_language_it_cannot_use_before_any_work(tmp_path: Path, args: list[str],
    message: str) -> None:
    problem = [] if "--resume" in args else [str(PROBLEM_PATH)]
    done = subprocess.run([*CLI, "run", *problem, *args], env=_env(tmp_path / "home"),
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "home").exists()


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_run_stops_at_the_speed_of_light_fraction_and_says_why(tmp_path: Path, eval_cache: Path) -> None:
    home = tmp_path / "home"
    env = _env(home, eval_cache)
    scripted = [("generalist", code_reply(s)) for s in (FUSED, CLAMPED)]
    replies = write_replies(tmp_path / "replies.json", scripted)
    done = subprocess.run(
        [*CLI, "run", str(PROBLEM_PATH), "--budget", "2", "--seed", "4", "--backend", f"scripted:{replies}",
         "--out", str(tmp_path / "out"), "--device", "cpu", "--strategy", "sampling", "--baselines", "eager",
         "--eval-settings", FAST_JSON, "--stop-at-sol", "0.000001"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["stop_reason"] == "sol", done.stderr
    assert summary["new_attempts"] == 1 and "--stop-at-sol 1e-06" in summary["message"]
    assert "--stop-at-sol" in done.stdout + done.stderr
    assert _attempts(home / "stark.db", summary["run_id"]) == 1
