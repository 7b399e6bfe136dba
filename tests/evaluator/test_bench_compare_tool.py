"""tools/bench_compare.py on the CPU: the table, and the agreement check against another version of
the comparison (here the same file, which must agree with itself)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_bench_compare_prints_a_table_and_checks_agreement() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "bench_compare.py"),
            "--device",
            "cpu",
            "--sizes",
            "4 MB",
            "--repeat",
            "1",
            "--against",
            str(ROOT / "stark_mcp" / "evaluator" / "trusted" / "compare.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "| 4 MB |" in done.stdout
    assert "statistics agree" in done.stdout
