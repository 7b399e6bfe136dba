"""How noisy is the CPU comparison? Evaluate a problem's own reference code as the candidate, again
and again, and print what each evaluation measured: the two runners' reported medians, their harness
overheads (bracket minus reported), the figure of record and the speedup. Identical code should score
1.0x, be believed ("reported"), and the two overheads should agree.

    python3 tools/cpu_timing_noise.py [PROBLEM.py] [--runs 8] [--evaluators 2]

Default problem: the adversarial suite's scaled_add (0.4 ms a call on one core). Settings: the suite's.
With ``--device cuda`` the same study on a GPU, under the GPU suite's settings (an honest GPU control
flagged ``timing_mismatch`` is then the thing to look at: which of the two overheads moved).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stark_mcp.evaluator import Evaluator  # noqa: E402
from stark_mcp.evaluator.host import worker_results  # noqa: E402
from stark_mcp.problems import load_problem, problem_from_source  # noqa: E402
from tests.adversarial.conftest import SUITE  # noqa: E402

DEFAULT_PROBLEM = ROOT / "tests" / "adversarial" / "problems" / "scaled_add.py"
seen: list[dict[str, Any]] = []


def _capture() -> None:
    """Keep the worker's per-call pairs (its answer carries them; the record does not)."""
    parse = worker_results.parse

    def keep(frame: dict[str, Any]) -> worker_results.WorkerResult:
        for shape in frame.get("shapes") or []:
            if isinstance(shape, dict) and "raw" in shape:
                seen.append(shape["raw"])
        return parse(frame)

    worker_results.parse = keep  # type: ignore[assignment]  (the service calls it through the module)


def as_candidate(source: str) -> str:
    return re.sub(r"\bModel\b", "ModelNew", source)


def row(i: int, evaluation: Any, raw: dict[str, Any] | None) -> str:
    trust = evaluation.trust
    speedup = evaluation.speedups.get("eager")
    cells = [str(i), f"{evaluation.status.value}/{evaluation.reason or '-'}"]
    if raw is not None:
        (cr, cb), (br, bb) = raw["candidate"], raw["baseline"]
        c_over = statistics.median(b - r for r, b in zip(cr, cb, strict=True))
        b_over = statistics.median(b - r for r, b in zip(br, bb, strict=True))
        cells += [
            f"{statistics.median(cr):.4f}",
            f"{statistics.median(br):.4f}",
            f"{c_over:.4f}",
            f"{b_over:.4f}",
        ]
    else:
        cells += ["-"] * 4
    cells += [
        f"{trust.external_ms:.4f}" if trust and trust.external_ms else "-",
        f"{speedup:.3f}" if speedup else "-",
        ",".join(evaluation.flags) or "-",
    ]
    return "| " + " | ".join(cells) + " |"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem", nargs="?", default=str(DEFAULT_PROBLEM))
    parser.add_argument("--candidate", help="a candidate file to evaluate instead of the reference itself")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--evaluators", type=int, default=2, help="fresh evaluators the runs are spread over")
    parser.add_argument(
        "--fresh-baseline", action="store_true", help="a new problem (and baseline runner) per evaluation"
    )
    parser.add_argument("--dump", help="write every evaluation's per-call pairs to this JSON file")
    parser.add_argument("--settings", default="{}", help="JSON overrides of the suite's settings")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    if args.device == "cuda":
        from tests.adversarial.test_gpu_suite import SETTINGS as suite
    else:
        suite = SUITE
    settings = suite.model_copy(update=json.loads(args.settings))
    _capture()
    problem = base = load_problem(args.problem)
    source = Path(args.candidate).read_text() if args.candidate else as_candidate(problem.source)
    print(
        "| # | verdict | cand reported ms | base reported ms | cand overhead ms | base overhead ms "
        "| external ms | speedup | flags |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    speedups, mismatches, i = [], 0, 0
    per = max(1, args.runs // args.evaluators)
    for _ in range(args.evaluators):
        async with Evaluator(Path(tempfile.mkdtemp()), settings) as ev:
            for _ in range(per):
                before = len(seen)
                if args.fresh_baseline:
                    problem = problem_from_source(
                        f"{base.source}\n# evaluation {i}\n", name=f"{base.name}_{i}"
                    )
                evaluation = await ev.evaluate(
                    problem, source, device=args.device, settings=settings, use_cache=False
                )
                raw = seen[before] if len(seen) > before else None
                i += 1
                print(row(i, evaluation, raw), flush=True)
                if evaluation.speedups.get("eager"):
                    speedups.append(evaluation.speedups["eager"])
                mismatches += "timing_mismatch" in evaluation.flags
    if args.dump:
        Path(args.dump).write_text(json.dumps(seen))
    if speedups:
        print(
            f"\nspeedup of identical code: min {min(speedups):.3f} median {statistics.median(speedups):.3f} "
            f"max {max(speedups):.3f}; flagged timing_mismatch {mismatches}/{i}"
        )


if __name__ == "__main__":
    asyncio.run(main())
