"""``stark-mcp bench`` and ``stark-mcp report`` end to end: resume, metrics, report files."""

from __future__ import annotations

import json
import math
import re
import sqlite3
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from stark_mcp.bench.files import read_results
from stark_mcp.cli import app
from stark_mcp.report.html import decode_run

from .conftest import CLI, BenchRun, cli_env

PAIRS = ["scaled_relu:sampling", "scaled_relu:reflexion", "sigmoid_scale:sampling", "sigmoid_scale:reflexion"]


def _runs(db: Path) -> dict[str, str]:
    """pair -> run id, straight from the database."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, config_json FROM runs").fetchall()
    return {json.loads(config)["bench"]["pair"]: run_id for run_id, config in rows}


def _nodes(db: Path, run_id: str) -> list[tuple[str, str | None, str, dict]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT id, parent_id, action, evaluation_json FROM nodes WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    return [(i, p, a, json.loads(e)) for i, p, a, e in rows]


@pytest.mark.slow
def test_the_first_command_stops_at_the_unstarted_pair_and_says_how_to_continue(bench_run: BenchRun) -> None:
    first = bench_run.first
    assert first.returncode == 1, first.stderr
    assert "3/4 pairs complete; rerun the same command to continue" in first.stderr
    assert (
        "[4/4] sigmoid_scale:reflexion" in first.stderr
        and "scripted backend has no reply queued" in first.stderr
    )
    assert "pairs 3/4 | attempts 6/8" in first.stderr  # the one status line of the whole benchmark


def test_rerunning_skips_finished_pairs_and_completes_the_rest(bench_run: BenchRun) -> None:
    second = bench_run.second
    assert second.returncode == 0, second.stderr
    for pair in PAIRS[:3]:
        assert f"{pair}: already complete, skipped" in second.stderr
    assert "sigmoid_scale:reflexion: resuming run" in second.stderr
    runs = _runs(bench_run.db)
    assert sorted(runs) == sorted(PAIRS)  # one run per pair: nothing was created twice
    rows = read_results(bench_run.out)
    assert [r.pair for r in rows] == PAIRS and all(r.complete for r in rows)
    assert {r.pair: r.run_id for r in rows} == runs
    # The resumed pair keeps the failed expansions of the first session and the time of both.
    last = rows[3]
    assert last.failed_expansions == 3 and last.wall_s > 0
    assert "pairs 4/4 | attempts 8/8" in second.stdout + second.stderr


def test_recorded_verdicts_and_metrics_match_the_hand_computation(bench_run: BenchRun) -> None:
    db, runs = bench_run.db, _runs(bench_run.db)
    verdicts = {pair: [(n[0], n[2], n[3]["status"]) for n in _nodes(db, runs[pair])[1:]] for pair in PAIRS}
    assert verdicts == {
        "scaled_relu:sampling": [("n1", "plan", "wrong_output"), ("n2", "plan", "passed")],
        "scaled_relu:reflexion": [("n1", "plan", "runtime_error"), ("n2", "debug", "passed")],
        "sigmoid_scale:sampling": [("n1", "plan", "load_error"), ("n2", "plan", "wrong_output")],
        "sigmoid_scale:reflexion": [("n1", "plan", "passed"), ("n2", "plan", "passed")],
    }
    # SIG_OFF is 2e-3 off everywhere: outside our precision contract, inside allclose(1e-2).
    off = _nodes(db, runs["sigmoid_scale:sampling"])[2][3]
    assert off["correctness"]["allclose_1e2"] is True and off["reason"] == "tolerance"

    def eager(pair: str, node: str) -> tuple[float, float]:
        evaluation = next(n[3] for n in _nodes(db, runs[pair]) if n[0] == node)
        return evaluation["runtime"]["median_ms"], evaluation["speedups"]["eager"]

    relu_s = eager("scaled_relu:sampling", "n2")[1]
    relu_r = eager("scaled_relu:reflexion", "n2")[1]
    sig_r = min(eager("sigmoid_scale:reflexion", "n1"), eager("sigmoid_scale:reflexion", "n2"))[
        1
    ]  # the faster

    report = json.loads((bench_run.out / "report.json").read_text())
    assert list(report["levels"]) == ["custom", "all"]
    sampling, reflexion = report["levels"]["custom"]["sampling"], report["levels"]["custom"]["reflexion"]
    assert (sampling["problems"], sampling["success_rate"], sampling["success_rate_allclose"]) == (
        2,
        0.5,
        1.0,
    )
    assert (sampling["rejected_allclose_ok"], sampling["compile_rate"], sampling["correct_rate"]) == (
        1,
        0.75,
        0.25,
    )
    assert sampling["attempts_to_first_correct"] == 2.0
    assert sampling["geomean_speedup"]["eager"] == pytest.approx(math.sqrt(relu_s * 1.0))
    assert sampling["mean_speedup"]["eager"] == pytest.approx((relu_s + 1.0) / 2)
    assert sampling["fast_p"]["eager"] == {p: (0.5 if relu_s > float(p) else 0.0) for p in ("1", "1.5", "2")}
    assert (reflexion["success_rate"], reflexion["compile_rate"], reflexion["correct_rate"]) == (
        1.0,
        1.0,
        0.75,
    )
    assert reflexion["attempts_to_first_correct"] == 1.5
    assert reflexion["geomean_speedup"]["eager"] == pytest.approx(math.sqrt(relu_r * sig_r))
    assert reflexion["geomean_speedup_correct"]["eager"] == pytest.approx(math.sqrt(relu_r * sig_r))
    assert report["baselines"] == {"eager": {"mode": "eager PyTorch"}}
    # One level: the all-levels group holds the same numbers.
    for strategy in ("sampling", "reflexion"):
        assert report["levels"]["all"][strategy] == report["levels"]["custom"][strategy] | {"level": "all"}
    costs = [r.usage.cost_usd for r in read_results(bench_run.out) if r.strategy == "sampling"]
    assert sampling["cost_usd"] == pytest.approx(sum(costs) / 2) and sampling["cost_usd"] > 0


def test_the_report_has_its_tables_and_valid_png_plots(bench_run: BenchRun) -> None:
    out = bench_run.out
    markdown = (out / "report.md").read_text()
    assert "| sampling | 2 | 50% | 100% |" in markdown and "### eager: eager PyTorch" in markdown
    assert "1 attempt(s) failed our evaluator" in markdown
    for name in ("best_so_far.png", "speedup_distribution.png", "success_fast_p.png"):
        with Image.open(out / name) as image:
            image.verify()  # raises on a truncated or malformed file
            assert image.format == "PNG" and image.size[0] > 300 and image.size[1] > 200


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: dict[str, str] = {}
        self._current: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._current = dict(attrs).get("id") or "(code)"
            self.scripts[self._current] = ""

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self.scripts[self._current] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._current = None


def test_the_html_report_parses_and_holds_every_node_with_its_details(bench_run: BenchRun) -> None:
    html = (bench_run.out / "report.html").read_text()
    # Self-contained: the only address in it is the SVG namespace, which is never fetched.
    assert set(re.findall(r"https?://[^\s\"')]+", html)) == {"http://www.w3.org/2000/svg"}
    assert "<link" not in html and " src=" not in html and "url(" not in html
    parser = _Scripts()
    parser.feed(html)
    index = json.loads(parser.scripts["stark-index"])
    runs = _runs(bench_run.db)
    assert sorted(r["id"] for r in index["runs"]) == sorted(runs.values())
    for run_id in runs.values():
        data = decode_run(parser.scripts[f"run-{run_id}"])
        stored = _nodes(bench_run.db, run_id)
        assert [n["id"] for n in data["nodes"]] == [n[0] for n in stored]
        for node in data["nodes"][1:]:
            assert node["source"] and node["diff"].startswith("--- n")
            assert node["evaluation"]["status"] == next(n[3]["status"] for n in stored if n[0] == node["id"])
            assert [x["role"] for x in node["exchanges"]] == ["generalist"]
            assert data["texts"][node["exchanges"][0]["prefix"]].strip()
    last = decode_run(parser.scripts[f"run-{runs['sigmoid_scale:reflexion']}"])
    assert len(last["orphans"]) == 3  # the first session's failed expansions


def test_report_of_one_run_writes_its_viewer_and_plot(bench_run: BenchRun, tmp_path: Path) -> None:
    run_id = _runs(bench_run.db)["scaled_relu:reflexion"]
    done = subprocess.run(
        [*CLI, "report", run_id, "--out", str(tmp_path / "one")],
        env=cli_env(bench_run.home),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        str(tmp_path / "one" / "report.html"),
        str(tmp_path / "one" / "attempts.png"),
    ]
    parser = _Scripts()
    parser.feed((tmp_path / "one" / "report.html").read_text())
    assert [n["id"] for n in decode_run(parser.scripts[f"run-{run_id}"])["nodes"]] == ["n0", "n1", "n2"]
    with Image.open(tmp_path / "one" / "attempts.png") as image:
        image.verify()
    # Bad targets, in process (no interpreter to start): each says what is wrong and exits 2.
    runner = CliRunner()
    for target, message in (
        ("r-nosuch", "no run 'r-nosuch'"),
        (str(tmp_path / "x.txt"), "neither a benchmark"),
    ):
        result = runner.invoke(app, ["report", target], env={"STARK_HOME": str(bench_run.home)})
        assert result.exit_code == 2 and message in result.output, result.output
