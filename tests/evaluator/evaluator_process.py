"""One evaluator in a process of its own, for the tests of evaluators side by side (test_many_evaluators.py).

``python -m tests.evaluator.evaluator_process CACHE N UID_BASE`` evaluates the honest torch-ops
candidate on the ``scaled_add`` adversarial problem N times, uncached, with sandbox uids from
UID_BASE, and prints one line of JSON per evaluation (``{"i", "status", "reason", "message"}``) as
each ends, then ``{"done": true}``. Its TMPDIR, HOME and STARK_HOME are whatever the test gave it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.evaluator.sandbox.levels import SandboxPolicy
from stark_mcp.problems import load_problem

HERE = Path(__file__).resolve().parent
PROBLEM = HERE.parent / "adversarial" / "problems" / "scaled_add.py"
CANDIDATE = (HERE.parent / "adversarial" / "cpu" / "honest_fused_add.py").read_text()
# Correctness only matters here, and its trials run on every call: timing is kept to its minimum.
SETTINGS = EvalSettings(
    baselines=("eager",), trials=2, warmup_s=0.0, min_calls=3, min_time_s=0.0, max_time_s=0.05,
    input_sets=1, correctness_timeout_s=60.0, load_timeout_s=120.0, timing_timeout_s=120.0,
)


async def main(cache: str, count: int, uid_base: int) -> None:
    problem = load_problem(str(PROBLEM))
    async with Evaluator(Path(cache), SETTINGS, policy=SandboxPolicy(uid_base=uid_base)) as ev:
        for i in range(count):
            evaluation = await ev.evaluate(
                problem, CANDIDATE, device="cpu", settings=SETTINGS, use_cache=False
            )
            line = {"i": i, "status": evaluation.status.value, "reason": evaluation.reason,
                    "message": evaluation.message[:400]}
            print(json.dumps(line), flush=True)
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
