"""``stark-mcp show RUN --profile``: the kernel profiles kept with a run's evaluations."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stark_mcp.cli import app
from stark_mcp.config import Settings
from stark_mcp.evaluator.host import profile_reports
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Evaluation, Status, TimingStats
from stark_mcp.store import Store

from .replies import PROBLEM

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"


def _passed(ms: float) -> Evaluation:
    stats = TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, samples=5)
    return Evaluation(status=Status.PASSED, runtime=stats, speedups={"eager": 2.0 / ms})


async def _recorded_run(home: Path) -> str:
    recorded = (SAMPLES / "ncu_raw.csv").read_text()
    report = profile_reports.from_answer({"source": "ncu", "report": recorded}, None, 40, 9.0)
    async with await Store.open(Settings(home=home).database) as store:
        run = await store.create_run(
            problem=problem_from_source(PROBLEM, name="p"),
            device="cuda",
            policy={},
            budget=3,
            seed=1,
            root_evaluation=_passed(2.0),
        )
        await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source="s", evaluation=_passed(1.0))
        await store.add_profile(run.id, "n1", report)
        await store.add_profile(run.id, "n0", profile_reports.unavailable("profiling needs a GPU"))
    return run.id


def test_show_profile_prints_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("STARK_HOME", str(home))
    run_id = asyncio.run(_recorded_run(home))
    runner = CliRunner()
    shown = runner.invoke(app, ["show", run_id, "--profile"])
    assert shown.exit_code == 0, shown.output
    rows = [line for line in shown.output.splitlines() if line.startswith("| n1 |")]
    assert len(rows) == 2 and "| memory |" in rows[1] and "| compute |" in rows[0]
    assert "profiles without kernels: n0: profiling needs a GPU" in shown.output
    one = runner.invoke(app, ["show", run_id, "--profile", "--node", "n0"])
    assert one.exit_code == 0 and "no profiles with kernels (n0: profiling needs a GPU)" in one.output
