"""Evaluators side by side on one machine, each a process of its own started with its own TMPDIR,
HOME and STARK_HOME (as an MCP host, a terminal ``run`` and a benchmark would start them): none
touches another's candidates, and what a SIGKILLed one leaves behind is cleaned by the next start,
only that. Before sandbox uids were claimed machine-wide, each evaluator kept its uid locks under
its own TMPDIR and killed every process of a uid it took: honest candidates of the others came back
``runtime_error (signal)``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stark_mcp.evaluator.sandbox.cgroups import hierarchies
from stark_mcp.evaluator.sandbox.claims import start_time
from stark_mcp.evaluator.sandbox.launch import descendants
from stark_mcp.evaluator.sandbox.levels import detect

ROOT = Path(__file__).resolve().parents[2]
EVALUATIONS = 20
# Every evaluator here takes its uids from one base of its own, away from the default: what is tested
# is evaluators that share a base, and other test runs on the machine stay out of it.
UID_BASE = 64000 + (os.getpid() % 64) * 16
pytestmark = [pytest.mark.slow(seconds=300), pytest.mark.xdist_group("many_evaluators")]


def start(tmp_path: Path, name: str, count: int) -> subprocess.Popen[str]:
    home = tmp_path / name
    for sub in ("tmp", "home", "stark"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TMPDIR=str(home / "tmp"), HOME=str(home / "home"), STARK_HOME=str(home / "stark"))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.evaluator.evaluator_process", str(home / "cache"), str(count),
         str(UID_BASE)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def results(proc: subprocess.Popen[str], timeout: float) -> list[dict[str, object]]:
    out, _ = proc.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines and lines[-1] == {"done": True}, out[-2000:]
    return lines[:-1]


def failures(lines: list[dict[str, object]]) -> list[dict[str, object]]:
    return [line for line in lines if line["status"] != "passed"]


@pytest.mark.parametrize("count", [2, 3])
def test_evaluators_side_by_side_never_touch_each_other(tmp_path: Path, count: int) -> None:
    procs = [start(tmp_path, f"ev{i}", EVALUATIONS) for i in range(count)]
    try:
        seen = [results(proc, 600) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    for lines in seen:
        assert len(lines) == EVALUATIONS
        assert not failures(lines), failures(lines)


def test_a_sigkilled_evaluator_leaves_the_others_alone_and_its_leftovers_go(tmp_path: Path) -> None:
    victim = start(tmp_path, "victim", 100)
    others = [start(tmp_path, f"ev{i}", EVALUATIONS) for i in range(2)]
    tree: list[tuple[int, int | None]] = []
    try:
        assert victim.stdout is not None
        for _ in range(2):  # mid-run: two evaluations done, the next one under way
            line = victim.stdout.readline()
            assert line.startswith("{"), line
        time.sleep(0.5)
        tree = [(pid, start_time(pid)) for pid in [victim.pid, *descendants(victim.pid)]]
        os.killpg(victim.pid, signal.SIGKILL)  # the evaluator and everything of it still in its session
        for pid, _ in tree:
            try:
                os.kill(pid, signal.SIGKILL)  # and the rest of its tree (a worker in a session of its own)
            except ProcessLookupError:
                pass
        victim.wait(30)
        seen = [results(proc, 600) for proc in others]
    finally:
        for proc in [victim, *others]:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    for lines in seen:
        assert len(lines) == EVALUATIONS
        assert not failures(lines), failures(lines)
    # The next start sweeps what the dead evaluator's processes left: their cgroups, by owner name.
    results(start(tmp_path, "next", 1), 300)
    info = detect()
    if not (info.root and info.cgroup):
        return
    dead = {f"stark-{pid}-{started}" for pid, started in tree}
    left = [name for base in hierarchies(info.cgroup) for name in os.listdir(base) if name in dead]
    assert not left, left
    # Nothing of its tree lives on (its jails died with it: bubblewrap's and the zygote's death signals).
    assert not [pid for pid, started in tree if started is not None and start_time(pid) == started]
