#!/usr/bin/env python3
"""The worker's two after-the-verdict GPU commands in one short call (about 50 s on an H200): Nsight
Compute's profile of a passing Triton candidate, and compute-sanitizer's first report on one that
reads far out of bounds. The quick check after a change to the parent-worker wire or the profiling
code; ``tools/gpu_profiler.py`` is the full proof (bounds, cost, cache, the reference's profile).

    . tools/device_prelude.sh && python3 tools/gpu_after_verdict.py

Prints one row per candidate and the first lines of what came back; exit 0 when the honest one
passed with an Nsight Compute profile and the other failed with the sanitizer's report.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stark_mcp.evaluator import EvalSettings, Evaluator  # noqa: E402
from stark_mcp.problems import load_problem  # noqa: E402

HONEST = (ROOT / "tests" / "adversarial" / "gpu" / "gpu_honest_triton.py").read_text()
OUT_OF_BOUNDS = HONEST.replace("tl.load(x_ptr + offs, mask=mask)", "tl.load(x_ptr + offs + (1 << 38))")
SETTINGS = EvalSettings(
    baselines=("eager",), trials=2, max_time_s=0.5, profile=True, sanitize=True,
    profile_timeout_s=60.0, sanitize_timeout_s=60.0,
)  # fmt: skip


async def main() -> int:
    assert OUT_OF_BOUNDS != HONEST, "the honest candidate's load line changed: update OUT_OF_BOUNDS"
    problem = load_problem(str(ROOT / "tests" / "adversarial" / "problems" / "gpu_relu_add.py"))
    ok = True
    print("| candidate | verdict | speedup vs eager | phases over 0.5 s | wall s |\n|---|---|---|---|---|")
    async with Evaluator(Path(tempfile.mkdtemp()), SETTINGS) as ev:
        for name, source in (("honest, profiled", HONEST), ("out of bounds, sanitized", OUT_OF_BOUNDS)):
            t0 = time.monotonic()
            r = await ev.evaluate(problem, source, device="cuda", settings=SETTINGS, use_cache=False)
            phases = {k: round(v, 1) for k, v in r.phase_seconds.items() if v >= 0.5}
            speedup = r.speedups.get("eager")
            print(f"| {name} | {r.status.value}/{r.reason or '-'} | {f'{speedup:.2f}x' if speedup else '-'} "
                  f"| {phases} | {time.monotonic() - t0:.1f} |", flush=True)
            if r.profile is not None:
                print(f"  profile: {str(r.profile)[:400]}")
            for key, text in (r.logs or {}).items():
                print(f"  log {key}: {text[:300]!r}")
            if source is HONEST:
                ok &= r.passed and r.profile is not None and r.profile.source == "ncu"
            else:
                ok &= "Invalid __global__" in (r.logs or {}).get("compute-sanitizer", "")
    print("all as expected" if ok else "NOT AS EXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
