"""CPU checks of the scale-out tooling: tools/bench_scale.py end to end in its dry run, and the store's
write-rate script on a few attempts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_bench_scale_dry_run_benches_one_leg_and_keeps_it_for_the_next_call(tmp_path: Path) -> None:
    results = tmp_path / "legs.json"
    done = _tool("tools/bench_scale.py", "--dry-run", "--legs", "0", "--results", str(results))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| 0 | `--gpus 0` | 1 |" in done.stdout
    assert "| --gpus all / --gpus 0 | n/a |" in done.stdout  # one leg: no ratio yet
    kept = json.loads(results.read_text())
    assert kept["0"]["attempts"] == kept["0"]["planned"] == 1 and kept["0"]["per_hour"] > 0


def test_store_write_rate_script_reports_attempts_per_second(tmp_path: Path) -> None:
    out = tmp_path / "writes.json"
    done = _tool("tools/bench_store_writes.py", "--attempts", "12", "--writers", "1", "3", "--json", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [r["writers"] for r in rows] == [1, 3] and [r["attempts"] for r in rows] == [12, 12]
    assert all(r["attempts_per_s"] > 0 for r in rows)
