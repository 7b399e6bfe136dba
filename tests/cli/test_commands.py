"""The CLI as a newcomer meets it: a fast --help, --version, the run list, export's refusals and
warnings, and output that stays line-based off a terminal. Runs are written straight to a store,
so nothing here evaluates or calls a model."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stark_mcp import __version__
from stark_mcp.cli import app
from stark_mcp.cli.display import PhaseDisplay, print_summary
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Evaluation, Status, TimingStats
from stark_mcp.store import Store

PROBLEM = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
    "def get_inputs():\n    return [torch.ones(4)]\n\ndef get_init_inputs():\n    return []\n"
)
KERNEL = PROBLEM.replace("class Model(", "class ModelNew(")
HEAVY = ("torch", "numpy", "mcp", "anthropic", "aiosqlite")


def timed(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.01, mean_ms=ms, min_ms=ms, max_ms=ms, samples=30)


def passed(ms: float) -> Evaluation:
    return Evaluation(status=Status.PASSED, runtime=timed(ms), baselines={"eager": timed(1.0)},
                      speedups={"eager": 1.0 / ms}, device="cpu")


async def record_run(db: Path) -> str:
    """A run whose n1 is 2x faster than eager, n2 slower than eager and n3 failing."""
    async with await Store.open(db) as store:
        run = await store.create_run(
            problem=problem_from_source(PROBLEM, name="double"), device="cpu", policy={"name": "stark"},
            budget=5, seed=1, baselines={"eager": timed(1.0)}, root_evaluation=passed(1.0),
            config={"eval_settings": {"cpu_threads": 1, "min_calls": 5, "warmup_s": 0.0}},
        )
        for source, evaluation in ((KERNEL, passed(0.5)), (KERNEL + "# slow\nX = 1\n", passed(2.0)),
                                   (KERNEL + "Y = 2\n", Evaluation(status=Status.WRONG_OUTPUT))):
            await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source=source,
                evaluation=evaluation)
        return run.id


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STARK_HOME", str(tmp_path / "home"))
    for name in ("STARK_DB_PATH", "STARK_DEVICE", "STARK_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


def test_help_and_version_import_nothing_heavy() -> None:
    probe = (
        "import sys\nfrom stark_mcp.cli import main\n"
        "for argv in (['--help'], ['run', '--help'], ['--version']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout and f"stark-mcp {__version__}" in done.stdout
    assert "Warning" not in done.stderr  # no NumPy warning: torch is not even imported


def test_runs_lists_every_run_newest_first(home: Path) -> None:
    runner = CliRunner()
    assert "no runs yet" in runner.invoke(app, ["runs"]).output
    run_id = asyncio.run(record_run(home / "stark.db"))
    listed = runner.invoke(app, ["runs"])
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if line.startswith(run_id))
    assert "double" in row and "3/5" in row and "n1 2.00x vs eager" in row


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_export_refuses_what_it_cannot_write_and_warns_about_slow_kernels(home: Path, tmp_path: Path) -> None:
    run_id = asyncio.run(record_run(home / "stark.db"))
    runner = CliRunner()
    missing = tmp_path / "no_such_dir" / "k.py"
    refused = runner.invoke(app, ["export", run_id, "--out", str(missing)])
    assert refused.exit_code == 2 and "does not exist" in refused.output
    assert not missing.parent.exists()
    failing = runner.invoke(app, ["export", run_id, "--node", "n3", "--out", str(tmp_path / "n3.py")])
    assert failing.exit_code == 2 and "did not pass (wrong_output)" in failing.output
    assert not (tmp_path / "n3.py").exists()
    root = runner.invoke(app, ["export", run_id, "--node", "n0", "--out", str(tmp_path / "n0.py")])
    assert root.exit_code == 2 and "reference" in root.output

    # Recorded by hand, these figures are no kernel's: --no-verify (tests/orchestrator/test_verify.py
    # exports with the check).
    slow = runner.invoke(app, ["export", run_id, "--node", "n2", "--out", str(tmp_path / "n2.py"),
                               "--no-verify"])
    assert slow.exit_code == 0 and "warning: node n2 is slower than eager PyTorch (0.50x)" in slow.output
    best = runner.invoke(app, ["export", run_id, "--out", str(tmp_path / "best.py"), "--no-verify"])
    assert best.exit_code == 0 and "node n1" in best.output and "warning" not in best.output
    ran = subprocess.run([sys.executable, str(tmp_path / "best.py")], capture_output=True, text=True,
        timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "relative error vs reference: 0.000e+00" in ran.stdout
    assert "median of 5 calls after 0.0 s of warm-up on cpu, 1 CPU thread(s)" in ran.stdout
    assert "\nSTARK_EVIDENCE = {" in (tmp_path / "best.py").read_text()  # what verify checks


def test_show_reads_the_tree_without_an_evaluator(home: Path) -> None:
    run_id = asyncio.run(record_run(home / "stark.db"))
    shown = CliRunner().invoke(app, ["show", run_id])
    assert shown.exit_code == 0 and "n3 plan" in shown.output and "leaderboard" in shown.output
    assert not (home / "cache").exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_progress_is_whole_lines_and_repeats_are_dropped() -> None:
    stream = io.StringIO()
    display = PhaseDisplay(stream, prefix="eval: ")

    async def report() -> None:
        with display.showing():
            for done, message in ((1, "build"), (1, "build"), (2, "candidate: load")):
                await display.on_phase(done, 5, message)

    asyncio.run(report())
    assert stream.getvalue() == "eval: build (1/5)\neval: candidate: load (2/5)\n"


def test_in_a_terminal_progress_is_drawn_live() -> None:
    stream = _Terminal()
    display = PhaseDisplay(stream, prefix="eval: ")

    async def report() -> None:
        with display.showing():
            await display.on_phase(1, 5, "build")
            display.line("kept line")

    asyncio.run(report())
    assert "kept line" in stream.getvalue() and "\x1b[" in stream.getvalue()


def test_a_summary_is_a_table_in_a_terminal_and_key_value_lines_elsewhere() -> None:
    plain = io.StringIO()
    print_summary("stark-mcp run r-1", [("best", "n2: 0.5 ms"), ("LLM", "0 calls")], plain)
    assert plain.getvalue() == "stark-mcp run r-1\nbest: n2: 0.5 ms\nLLM: 0 calls\n"
    table = _Terminal()
    print_summary("stark-mcp run r-1", [("best", "n2: 0.5 ms")], table)
    assert "┃" in table.getvalue() or "│" in table.getvalue()


def test_doctor_names_the_isolation_level_and_where_data_lives(home: Path) -> None:
    shown = CliRunner().invoke(app, ["doctor"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith(f"stark-mcp {__version__}")
    level = next(line for line in shown.output.splitlines() if line.startswith("isolation: "))
    assert level.removeprefix("isolation: ") in ("sandbox", "uid", "process")
    assert f"database: {home / 'stark.db'}" in shown.output

    as_json = CliRunner().invoke(app, ["doctor", "--json"])
    report = json.loads(as_json.output)
    assert report["isolation"] == level.removeprefix("isolation: ")
    assert {t["name"] for t in report["tools"]} >= {"nvcc", "ncu", "bwrap"}


def test_doctor_finds_the_profiler_where_the_evaluator_does(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ncu = tmp_path / "my-ncu"
    ncu.write_text("#!/bin/sh\necho 'Version 2025.1.0'\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("STARK_NCU", str(ncu))
    monkeypatch.setenv("STARK_COMPUTE_SANITIZER", "off")
    report = json.loads(CliRunner().invoke(app, ["doctor", "--json"]).output)
    tools = {t["name"]: t for t in report["tools"]}
    assert tools["ncu"]["path"] == str(ncu) and tools["ncu"]["version"] == "Version 2025.1.0"
    assert tools["compute-sanitizer"]["path"] is None


def test_doctor_refuses_an_isolation_level_the_machine_cannot_give(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bubblewrap that does not exist cannot make a sandbox, wherever this runs.
    monkeypatch.setenv("STARK_BWRAP", str(tmp_path / "no-bwrap"))
    monkeypatch.setenv("STARK_ISOLATION", "sandbox")
    shown = CliRunner().invoke(app, ["doctor"])
    assert shown.exit_code == 1
    assert "isolation: REFUSED (sandbox requested): isolation sandbox is not possible" in shown.output
