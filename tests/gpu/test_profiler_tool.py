"""CPU checks of tools/gpu_profiler.py: its dry run end to end, and its pass/fail logic."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("stark_tool_gpu_profiler", ROOT / "tools" / "gpu_profiler.py")
assert spec is not None and spec.loader is not None
tool = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = tool
spec.loader.exec_module(tool)


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_dry_run_writes_the_page_from_the_recorded_report(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_profiler.py"), "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "profiler.md").read_text()
    assert "memory_bound: reads as memory-bound | DRAM 90%, SM 4%" in page
    assert "compute_bound: reads as compute-bound | DRAM 4%, SM 87%" in page
    assert "FAIL" not in page and "| memory_bound | vectorized_elementwise_kernel* |" in page
    written = json.loads((tmp_path / "gpu_profiler.json").read_text())
    assert written["memory_bound"]["profile"]["source"] == "ncu"


def test_a_fallback_profile_or_a_wrong_bound_fails() -> None:
    fallback = {
        "source": "torch_profiler",
        "reason": "ncu is not installed",
        "kernels": [{"own": True, "dram_throughput_pct": None, "sm_throughput_pct": None}],
    }
    wrong = {
        "own": True,
        "dram_throughput_pct": 80.0,
        "sm_throughput_pct": 30.0,
        "bound": "memory",
        "roofline": {"side": "memory"},
    }
    results = {
        "memory_bound": {"status": "passed", "profile": fallback, "profile_phase_s": 0.0},
        "compute_bound": {
            "status": "passed",
            "profile_phase_s": 25.0,
            "profile": {"source": "ncu", "kernels": [wrong]},
        },
        "unprofiled_ms": 1.0,
        "sanitizer": {"report": "========= Invalid __global__ read of size 4 bytes"},
    }
    results["memory_bound"]["median_ms"] = 1.5
    failed = {name for name, _, _, ok in tool.result_rows(results) if ok is False}
    assert failed == {
        "memory_bound: profile source",
        "memory_bound: reads as memory-bound",
        "compute_bound: reads as compute-bound",
        "compute_bound: profile cost",
        "memory_bound: median with / without the profile step",
        "illegal access: compute-sanitizer's first report",
    }
