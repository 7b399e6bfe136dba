"""tools/pm_sampling_probe.py (a device probe for issue 37) on a machine without a GPU: its child's
code compiles, and its span finder and burst matcher read a made-up trace as they should."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import pm_sampling_probe as probe  # noqa: E402


def test_the_dry_run_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "pm_sampling_probe.py"), "--dry-run"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "match its bursts" in done.stdout


def sample(i: int, active: float) -> dict[str, float]:
    return {"start_ns": i * 1000.0, "end_ns": (i + 1) * 1000.0, "active": active, "elapsed": 2000.0}


def test_noise_is_no_span_and_spans_that_do_not_line_up_match_nothing() -> None:
    trace = [sample(0, 0), sample(1, 2000), sample(2, 0), sample(3, 100), sample(4, 0), sample(5, 2000)]
    found = probe.spans(trace, 0.0)
    assert [round(s["active_ns"]) for s in found] == [1000, 1000]  # the 50 ns blip is left out
    assert probe.matched([["sleep", 0.001], ["forward", 0.001]], found)
    assert probe.matched([["sleep", 0.001], ["forward", 0.001], ["sleep", 0.001]], found) == []
