"""Why torch.compile's max-autotune baseline can time slower than its default mode, on a CUDA device.

For one KernelBench problem (default L1 88, the tanh GELU on an 8192 x 8192 input), read at run time
from KernelBench's JSONL, each mode is timed three ways in this process:

- ``same input``: one input tensor passed to every call (a loop that reuses its buffers);
- ``fresh inputs``: a new input tensor at a new address each call (rotating through three), which is
  what the evaluator does and what a model fed new activations does;
- the kernels one ``fresh inputs`` call launches, from the torch profiler (CUDA graphs replay their
  own kernels, and copy an input that is not at the recorded address into the graph's static buffer
  first: that copy shows as a kernel of its own).

Then the evaluator times the same problem with every compile baseline, so its figures sit beside the
plain ones. Prints a markdown table; ``--json FILE`` keeps the numbers.

    python3 tools/compile_modes.py [--kernelbench ../shared/kernelbench/problems.jsonl] [--problem 1/88]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODES = {
    "eager": None,
    "compile_default": "default",
    "compile_max_autotune": "max-autotune",
    "compile_max_autotune_no_cudagraphs": "max-autotune-no-cudagraphs",
}


def module_of(code: str) -> types.ModuleType:
    module = types.ModuleType("kb_problem")
    exec(compile(code, "kb_problem.py", "exec"), module.__dict__)  # noqa: S102 - the user's own benchmark file
    return module


def time_calls(fn: Any, inputs: list[list[Any]], calls: int) -> float:
    """Median ms of ``calls`` calls, each bracketed by CUDA events, rotating through ``inputs``."""
    import torch

    times = []
    for i in range(calls):
        args = inputs[i % len(inputs)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def kernels_of_one_call(fn: Any, args: list[Any]) -> list[tuple[str, float]]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    out: dict[str, float] = {}
    for evt in prof.events():
        if str(evt.device_type).endswith("CUDA"):
            us = float(getattr(evt, "device_time", None) or getattr(evt, "cuda_time", 0.0) or 0.0)
            out[evt.name[:70]] = out.get(evt.name[:70], 0.0) + us
    return sorted(out.items(), key=lambda kv: -kv[1])[:6]


def plain(module: types.ModuleType, calls: int) -> dict[str, dict[str, Any]]:
    import torch

    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    fresh = [[x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()] for _ in range(3)]
    same = [fresh[0]]
    rows: dict[str, dict[str, Any]] = {}
    for name, mode in MODES.items():
        torch._dynamo.reset()
        fn = model if mode is None else torch.compile(model, mode=None if mode == "default" else mode)
        started = time.monotonic()
        with torch.no_grad():
            for args in fresh * 3:  # compile, record, and settle on every input address
                fn(*args)
            torch.cuda.synchronize()
            warm_s = time.monotonic() - started
            same_ms = time_calls(fn, same, calls)
            fresh_ms = time_calls(fn, fresh, calls)
            kernels = kernels_of_one_call(fn, fresh[1])
        rows[name] = {"same_ms": same_ms, "fresh_ms": fresh_ms, "warm_s": warm_s, "kernels": kernels}
        print(f"{name}: same {same_ms:.4f} ms, fresh {fresh_ms:.4f} ms, kernels {kernels}", flush=True)
    return rows


async def evaluator(problem: Any, device: str) -> dict[str, float]:
    from stark_mcp.evaluator import EvalSettings, Evaluator

    # The reference itself, under the candidate's name: its own time is what each baseline is timed against.
    candidate = re.sub(r"\bModel\b", "ModelNew", problem.source)
    settings = EvalSettings(baselines=tuple(MODES), profile=False)
    async with Evaluator(Path(tempfile.mkdtemp()), settings) as ev:
        evaluation = await ev.evaluate(problem, candidate, device=device, settings=settings, use_cache=False)
    print(f"evaluator: {evaluation.status.value} {evaluation.message[:200]}", flush=True)
    return {name: stats.median_ms for name, stats in evaluation.baselines.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kernelbench", type=Path, default=ROOT.parent / "shared" / "kernelbench" / "problems.jsonl"
    )
    parser.add_argument("--problem", default="1/88", help="LEVEL/ID")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--skip-evaluator", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from stark_mcp.problems import load_problem

    problem = load_problem(f"{args.kernelbench}:{args.problem}")  # the project's own JSONL selector
    rows = plain(module_of(problem.source), args.calls)
    ours = {} if args.skip_evaluator else asyncio.run(evaluator(problem, args.device))
    print(f"\n### {problem.name} (level {problem.level}), medians in ms\n")
    print("| baseline | mode | same input | fresh inputs | evaluator | top kernels of one fresh call (us) |")
    print("|---|---|---|---|---|---|")
    for name, mode in MODES.items():
        r = rows[name]
        kernels = "; ".join(f"{k} {us:.0f}" for k, us in r["kernels"][:3])
        evaluated = ours.get(name)
        print(
            f"| {name} | {mode or 'eager'} | {r['same_ms']:.4f} | {r['fresh_ms']:.4f} | "
            f"{f'{evaluated:.4f}' if evaluated else '-'} | {kernels} |"
        )
    if args.json:
        report = {"problem": problem.name, "plain": rows, "evaluator": ours}
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
