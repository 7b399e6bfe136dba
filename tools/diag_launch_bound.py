"""Why a host-bound eager baseline moves between timings: KernelBench L3/23 (EfficientNetB1) in a
plain loop, in four fresh processes (the last pinned to one core), six blocks of 40 calls each.

Per block: the median and minimum call time (CUDA events), the SM clock, and the time to enqueue one
forward without a sync (the host's share). A maintainer diagnosis behind docs/benchmarks/kernels.md;
on a GPU box: ``python3 tools/diag_launch_bound.py problems.jsonl``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LEVEL, PROBLEM_ID = 3, 23
BLOCKS, CALLS = 6, 40


def reference_code(problems: Path) -> str:
    for line in problems.read_text().splitlines():
        row = json.loads(line)
        if (row["level"], row["problem_id"]) == (LEVEL, PROBLEM_ID):
            return str(row["code"])
    raise SystemExit(f"{problems}: no L{LEVEL}/{PROBLEM_ID}")


def child(problems: Path) -> None:
    import torch

    namespace: dict = {}
    exec(compile(reference_code(problems), f"L{LEVEL}_{PROBLEM_ID}", "exec"), namespace)  # noqa: S102
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]()).cuda()
    inputs = [t.cuda() for t in namespace["get_inputs"]()]
    blocks = []
    with torch.no_grad():
        for _ in range(10):
            model(*inputs)
        torch.cuda.synchronize()
        for block in range(BLOCKS):
            times = []
            for _ in range(CALLS):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            began = time.perf_counter()
            model(*inputs)
            enqueue_ms = (time.perf_counter() - began) * 1e3
            torch.cuda.synchronize()
            blocks.append({
                "median_ms": round(statistics.median(times), 3), "min_ms": round(min(times), 3),
                "sm_clock_mhz": torch.cuda.clock_rate(), "enqueue_ms": round(enqueue_ms, 3),
            })
            if block == 2:
                time.sleep(0.3)  # an idle gap, as between two evaluations
    print(json.dumps({"cores": len(os.sched_getaffinity(0)), "blocks": blocks}))


def main() -> None:
    problems = Path(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "child":
        child(problems)
        return
    for i in range(4):
        argv = [sys.executable, __file__, str(problems), "child"]
        if i == 3:
            argv = ["taskset", "-c", "1", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        label = f"process {i}" + (" (pinned to core 1)" if i == 3 else "")
        print(f"{label}: {done.stdout.strip() or done.stderr[-600:]}", flush=True)


if __name__ == "__main__":
    main()
