"""What a call's inputs and reference cost through the reference jail, against the worker running
the problem's code itself as it did before the jail (issue 37's jail; issue 40's attempt cost).

For KernelBench L1/88 (GELU) on the device: the median over 100 calls of (a) in this process,
drawing inputs and copying them (the old path), and of the reference; (b) through a reference jail
(``trusted.problem.LoadedProblem``: a frame to the jail, inputs drawn there into the exchange region,
copied out by the worker), and of its reference. A maintainer diagnosis; on a GPU box:
``python3 tools/diag_reference_jail_cost.py problems.jsonl`` (on the CPU: ``--device cpu --source
tests/fixtures/cpu/relu_sum.py``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stark_mcp.evaluator.common.shapes import input_tree  # noqa: E402
from stark_mcp.evaluator.reference.problem_code import ProblemCode  # noqa: E402
from tests.evaluator.test_reference_exchange import _problem  # noqa: E402

CALLS = 100


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e3, 3)


def mean_ms(samples: list[float]) -> float:
    """Inputs are drawn several calls at a time (``calls_per_request``): a median would show the
    calls served from the batch; the mean shows what a call costs."""
    return round(statistics.fmean(samples) * 1e3, 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", type=Path)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--id", type=int, default=88)
    parser.add_argument("--source", type=Path, help="a problem file instead (small ones for the CPU)")
    args = parser.parse_args()
    if args.source is not None:
        source = args.source.read_text()
    else:
        rows = [json.loads(line) for line in args.problems.read_text().splitlines()]
        source = next(r["code"] for r in rows if (r["level"], r["problem_id"]) == (args.level, args.id))
    folder = Path(tempfile.mkdtemp(prefix="refcost-"))
    path = folder / "problem.py"
    path.write_text(source)

    code = ProblemCode(str(path), "stark_problem_cost", args.device)
    code.load(1)
    code.probe(0, (2, 3))
    calls, refs = [], []
    for i in range(CALLS):
        began = time.perf_counter()
        inputs = code.generate(0, i)
        _tree, tensors, _args = input_tree(inputs)
        private = [t.clone() for t in tensors]
        sync(args.device)
        drawn = time.perf_counter()
        with torch.no_grad():
            code.model(*inputs)
            if code.model64 is not None:
                code._forward64(inputs)
        sync(args.device)
        calls.append(drawn - began)
        refs.append(time.perf_counter() - drawn)
        del inputs, tensors, private
    before = (mean_ms(calls), median_ms(refs))

    problem = _problem(folder / "jail", source, device=args.device)
    problem.load()
    calls, refs = [], []
    for _ in range(CALLS):
        began = time.perf_counter()
        call = problem.new_call(0)
        sync(args.device)
        drawn = time.perf_counter()
        problem.reference(call)
        sync(args.device)
        calls.append(drawn - began)
        refs.append(time.perf_counter() - drawn)
        del call
    problem.close()
    after = (mean_ms(calls), median_ms(refs))
    label = args.source.name if args.source is not None else f"L{args.level}/{args.id}"
    print(f"| {label} on {args.device} | new call ms (mean) | reference ms (median) |\n|---|---|---|")
    print(f"| in the worker (before) | {before[0]} | {before[1]} |")
    print(f"| through the reference jail | {after[0]} | {after[1]} |")


if __name__ == "__main__":
    main()
