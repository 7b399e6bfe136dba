"""``stark-mcp report --runs``: the benchmark's table over runs in the store (as a host drives them
through MCP), per level and overall, with the fastest torch.compile mode and the speed of light."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stark_mcp.cli import app
from stark_mcp.problems import Problem
from stark_mcp.records import Action, Evaluation, Status, TimingStats
from stark_mcp.sol.model import Peaks, SolReport
from stark_mcp.store import Store

SOURCE = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
    "def get_inputs():\n    return [torch.ones(4)]\n\ndef get_init_inputs():\n    return []\n"
)
PEAKS = Peaks(device_name="H200", bandwidth_bytes_per_s=4.8e12, fp32_flops_per_s=6e13)


def timed(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.01, mean_ms=ms, min_ms=ms, max_ms=ms, samples=30)


def passed(ms: float, baselines: dict[str, float], sol: float | None = None) -> Evaluation:
    report = (
        SolReport(floor_ms=ms * sol, time_ms=ms, fraction=sol, headroom=1 / sol, peaks=PEAKS, margin=1.0)
        if sol else None
    )
    return Evaluation(
        status=Status.PASSED, runtime=timed(ms), baselines={k: timed(v) for k, v in baselines.items()},
        speedups={k: v / ms for k, v in baselines.items()}, device="cuda", sol=report, wall_seconds=10.0,
    )


def failed(status: Status) -> Evaluation:
    return Evaluation(status=status, message="boom", device="cuda", wall_seconds=5.0)


async def record(db: Path, level: int, pid: int, baselines: dict[str, float],
                 attempts: list[Evaluation]) -> str:
    problem = Problem(name=f"p{level}_{pid}", source=SOURCE, origin="test", level=level, problem_id=pid)
    async with await Store.open(db) as store:
        run = await store.create_run(
            problem=problem,
            device="cuda", policy={"name": "stark"}, budget=2, seed=1,
            baselines={k: timed(v) for k, v in baselines.items()},
            root_evaluation=passed(baselines["eager"], baselines),
        )
        for i, evaluation in enumerate(attempts):
            await store.add_node(run.id, parent_id="n0", action=Action.PLAN, source=SOURCE + f"# {i}\n",
                                 evaluation=evaluation)
        return run.id


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STARK_HOME", str(tmp_path / "home"))
    for name in ("STARK_DB_PATH", "STARK_DEVICE", "STARK_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


def test_runs_report_aggregates_levels_compile_modes_and_sol(home: Path, tmp_path: Path) -> None:
    db = home / "stark.db"
    home.mkdir()
    compiled = {"eager": 1.0, "compile_default": 0.8, "compile_max_autotune": 0.5}
    a = asyncio.run(record(db, 1, 5, compiled, [passed(0.5, compiled, 0.4), failed(Status.WRONG_OUTPUT)]))
    b = asyncio.run(record(db, 1, 6, {"eager": 1.0, "compile_default": 1.2},
                           [passed(0.25, {"eager": 1.0, "compile_default": 1.2}, 0.8)]))
    c = asyncio.run(record(db, 2, 1, {"eager": 2.0}, [failed(Status.BUILD_ERROR)]))
    out = tmp_path / "table"
    done = CliRunner().invoke(app, ["report", "--runs", f"{a},{b},{c}", "--out", str(out)])
    assert done.exit_code == 0, done.output
    report = json.loads((out / "report.json").read_text())
    overall = report["levels"]["all"]["stark"]
    assert overall["problems"] == 3 and overall["solved"] == 2 and overall["attempts"] == 4
    assert overall["success_rate"] == pytest.approx(2 / 3)
    assert overall["fast_p"]["eager"] == pytest.approx({"1": 2 / 3, "1.5": 2 / 3, "2": 1 / 3})
    assert overall["geomean_speedup"]["eager"] == pytest.approx(2.0)  # (2 * 4 * 1) ** (1/3)
    assert overall["mean_speedup"]["eager"] == pytest.approx(7 / 3)
    # Each problem's fastest compile mode: 0.5 ms for a (1x), 1.2 ms for b (4.8x); c has none.
    assert overall["baseline_problems"]["compile_best"] == 2
    assert overall["geomean_speedup"]["compile_best"] == pytest.approx(math.sqrt(4.8))
    assert overall["mean_sol_fraction"] == pytest.approx(0.6)
    assert overall["total_wall_s"] == pytest.approx(10 + 5 + 10 + 5)
    assert report["levels"]["1"]["stark"]["success_rate"] == 1.0
    assert report["levels"]["2"]["stark"]["success_rate"] == 0.0
    assert [p["run_id"] for p in report["problems"]] == [a, b, c]
    assert [p["key"] for p in report["problems"]] == ["1/5", "1/6", "2/1"]
    markdown = (out / "report.md").read_text()
    assert "## Level 1" in markdown and "## Level 2" in markdown and "each problem's fastest mode" in markdown
    assert f"`{c}`" in markdown
    assert (out / "report.html").exists()


def test_runs_report_refuses_what_it_cannot_report(home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["report"]).exit_code == 2
    unknown = runner.invoke(app, ["report", "--runs", "r-nothere", "--out", str(tmp_path / "x")])
    assert unknown.exit_code == 2 and "r-nothere" in unknown.output
    both = runner.invoke(app, ["report", "somewhere", "--runs", "r-1"])
    assert both.exit_code == 2 and "not both" in both.output
