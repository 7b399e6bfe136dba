"""Does CPU load elsewhere on the box move an eager baseline? The evaluator times the eager baseline of
KernelBench L3/23 (host-bound) and L2/71 (GPU-bound) four times in a row: quiet, with a busy process
on every core after the three timing cores (where builds run), with one on every core, quiet again.

A maintainer diagnosis behind docs/benchmarks/kernels.md; on a GPU box:
``python3 tools/diag_baseline_contention.py problems.jsonl`` (each timing on a fresh cache).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from stark_mcp.evaluator import Evaluator
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.problems.loading import problem_from_source

PROBLEMS = {"L3/23": (3, 23), "L2/71": (2, 71)}


def busy(cores: list[int]) -> list[subprocess.Popen]:
    spin = [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(["taskset", "-c", str(core), *spin]) for core in cores]


async def eager(problem) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as home:
        async with Evaluator(Path(home) / "cache", EvalSettings(baselines=["eager"])) as ev:
            stats = (await ev.baselines(problem, device="cuda", which=["eager"]))["eager"]
    return round(stats.median_ms, 3), round(stats.iqr_ms, 3), round(stats.min_ms, 3)


async def main() -> None:
    rows = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines()]
    problems = {
        label: problem_from_source(
            next(r["code"] for r in rows if (r["level"], r["problem_id"]) == key),
            name=label.replace("/", "_"),
        )
        for label, key in PROBLEMS.items()
    }
    cores = os.cpu_count() or 1
    conditions = [
        ("quiet", []),
        ("busy cores 3..N (the build cores)", list(range(3, cores))),
        ("busy every core", list(range(cores))),
        ("quiet again", []),
    ]
    results = []
    for condition, busy_cores in conditions:
        spinners = busy(busy_cores)
        try:
            for label, problem in problems.items():
                results.append((condition, label, *await eager(problem)))
                print(*results[-1], flush=True)
        finally:
            for spinner in spinners:
                spinner.kill()
    print("| condition | problem | eager median ms | IQR ms | min ms |\n|---|---|---|---|---|")
    for row in results:
        print("| " + " | ".join(map(str, row)) + " |")


if __name__ == "__main__":
    asyncio.run(main())
