#!/usr/bin/env python3
"""Speed of light on a lent GPU: calibrated peaks, and each problem's floor beside eager PyTorch and
torch.compile, all through the evaluator (docs/sol.md; results: docs/benchmarks/sol.md).

    python3 tools/sol_table.py --kernelbench /path/to/problems.jsonl      # on the GPU, ~6 minutes
    python3 tools/sol_table.py --dry-run                                 # CPU: the same flow, tiny

Steps, each announced on its own line:
  (a) the device's peaks, calibrated by the evaluator's trusted worker, beside the datasheet's;
  (b) for each KernelBench problem (L1 59, 15, 94, 100; L2 51, 50, 47, 71; L3 48, 23; L1 23, 88):
      the floor (memory and compute), eager and torch.compile(default) medians and their fraction of
      the floor, and what bounds it. torch.compile is skipped for level 3 (slow to compile) unless
      ``--compile all``; ``--compile none`` skips it everywhere; past ``--budget-s`` no new compile
      starts;
  (c) two candidates evaluated like any attempt: a device copy (target: >= 80% of its bandwidth
      roofline) and the honest fused GELU of L1 88 (tools/candidates/gelu_tanh_cuda.py);
  (d) a markdown table last; with $OUT (or --out) set, sol_table.md and sol_table.json there.
The problems' code is read at run time from KernelBench's JSONL; nothing of it is kept here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stark_mcp.evaluator import EvalSettings, Evaluator  # noqa: E402
from stark_mcp.problems import Problem, problem_from_source  # noqa: E402
from stark_mcp.records import Evaluation, ShapeResult, Status, TimingStats  # noqa: E402
from stark_mcp.sol.model import Peaks, SolReport  # noqa: E402
from stark_mcp.sol.published import published_peaks  # noqa: E402
from stark_mcp.sol.text import rate  # noqa: E402

PROBLEMS = [(1, 59), (1, 15), (1, 94), (1, 100), (2, 51), (2, 50), (2, 47), (2, 71), (3, 48), (3, 23),
            (1, 23), (1, 88)]
COPY_TARGET = 0.80

COPY_PROBLEM = '''
import torch
from torch import nn

N = {n}


class Model(nn.Module):
    def forward(self, x):
        return x.clone()


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''
COPY_CANDIDATE = '''
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        out.copy_(x)
        return out
'''
# The dry run's stand-ins for KernelBench: a matmul (compute-bound) and an elementwise op.
DRY_PROBLEMS = {
    "dry/matmul": '''
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(256, 256), torch.randn(256, 256)]


def get_init_inputs():
    return []
''',
    "dry/gelu": '''
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return []
''',
}
DRY_GELU_CANDIDATE = '''
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
'''


def log(message: str) -> None:
    print(f"[sol_table {time.strftime('%H:%M:%S')}] {message}", flush=True)


def kernelbench(path: Path) -> dict[str, tuple[int, str]]:
    """label -> (level, code) for the wanted problems, read from KernelBench's JSONL."""
    wanted = set(PROBLEMS)
    found: dict[tuple[int, int], tuple[str, str]] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            item = json.loads(line)
            key = (int(item["level"]), int(item["problem_id"]))
            if key in wanted:
                found[key] = (str(item["name"]), str(item["code"]))
    missing = [f"L{lv}/{pid}" for lv, pid in PROBLEMS if (lv, pid) not in found]
    if missing:
        raise SystemExit(f"{path}: no problem for {', '.join(missing)}")
    return {f"L{lv}/{pid} {found[(lv, pid)][0]}": (lv, found[(lv, pid)][1]) for lv, pid in PROBLEMS}


def as_evaluation(problem: Problem, per_shape: dict[str, TimingStats]) -> Evaluation:
    shapes = [ShapeResult(label=label, runtime=stats) for label, stats in per_shape.items()]
    first = next(iter(per_shape.values()))
    return Evaluation(status=Status.PASSED, runtime=first, shapes=shapes, problem_hash=problem.hash)


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


async def problem_row(
    ev: Evaluator, label: str, problem: Problem, device: str, compile_it: bool
) -> dict[str, Any]:
    started = time.monotonic()
    row: dict[str, Any] = {"problem": label}
    which = ["eager", "compile_default"] if compile_it else ["eager"]
    per_shape = await ev.baseline_shapes(problem, device=device, which=which)
    eager = await ev.sol_of(problem, as_evaluation(problem, per_shape["eager"]), device=device)
    row["eager_ms"] = next(iter(per_shape["eager"].values())).median_ms
    if eager is not None:
        floor = eager.shapes[0].floor
        row.update(
            floor_ms=eager.floor_ms, memory_ms=floor.memory_ms, compute_ms=floor.compute_ms,
            bound=eager.bound, compute_peak=eager.compute_peak, eager_fraction=eager.fraction,
            flops=floor.total_flops,
            bytes=floor.bytes, top_ops=dict(list(floor.flops_by_op.items())[:3]),
        )
    if "compile_default" in per_shape:
        compiled: SolReport | None = await ev.sol_of(
            problem, as_evaluation(problem, per_shape["compile_default"]), device=device
        )
        row["compile_ms"] = next(iter(per_shape["compile_default"].values())).median_ms
        row["compile_fraction"] = compiled.fraction if compiled else None
    else:
        row["compile_ms"] = None
        row["compile_note"] = "skipped" if not compile_it else "failed"
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


async def candidate_row(
    ev: Evaluator, label: str, problem: Problem, source: str, device: str, target: float | None
) -> dict[str, Any]:
    evaluation = await ev.evaluate(problem, source, device=device)
    sol = evaluation.sol
    row = {
        "candidate": label, "status": evaluation.status.value, "reason": evaluation.reason,
        "time_ms": evaluation.runtime.median_ms if evaluation.runtime else None,
        "floor_ms": sol.floor_ms if sol else None, "fraction": sol.fraction if sol else None,
        "bound": sol.bound if sol else None, "flags": evaluation.flags, "target": target,
        "message": evaluation.message[:300] if not evaluation.passed else "",
    }
    if target is not None:
        row["verdict"] = "PASS" if sol and sol.fraction and sol.fraction >= target else "FAIL"
    return row


def peaks_table(measured: Peaks | None, published: Peaks | None) -> str:
    def cell(p: Peaks | None, field: str, unit: str) -> str:
        value = getattr(p, field) if p is not None else None
        return rate(value, unit) if value else "-"

    lines = ["| peak | measured | published |", "|---|---|---|"]
    for name, field, unit in (("memory bandwidth (read+write)", "bandwidth_bytes_per_s", "B/s"),
                              ("FP32, no tensor cores", "fp32_flops_per_s", "FLOP/s"),
                              ("bf16 tensor cores (dense)", "tensor_flops_per_s", "FLOP/s")):
        lines.append(f"| {name} | {cell(measured, field, unit)} | {cell(published, field, unit)} |")
    if measured is not None:
        lines.append(f"| how | {measured.source}, {measured.obtained_at}: {measured.method} | datasheet |")
    return "\n".join(lines)


def problems_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| problem | floor ms (memory / compute) | bound | eager ms | eager SOL | compile ms | compile SOL |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['problem']} | error: {r['error'][:120]} | | | | | |")
            continue
        floor = f"{ms(r.get('floor_ms'))} ({ms(r.get('memory_ms'))} / {ms(r.get('compute_ms'))})"
        compiled = ms(r.get("compile_ms")) if r.get("compile_ms") else r.get("compile_note", "-")
        lines.append(
            f"| {r['problem']} | {floor} | {r.get('bound', '-')} | {ms(r.get('eager_ms'))} | "
            f"{_pct(r.get('eager_fraction'))} | {compiled} | {_pct(r.get('compile_fraction'))} |"
        )
    return "\n".join(lines)


def candidates_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| candidate | verdict | time ms | floor ms | fraction of SOL | target |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        target = f">= {r['target']:.0%}: {r.get('verdict')}" if r.get("target") is not None else "-"
        status = r["status"] + (f" ({r['reason']})" if r.get("reason") else "")
        lines.append(
            f"| {r['candidate']} | {status} | {ms(r.get('time_ms'))} | {ms(r.get('floor_ms'))} | "
            f"{_pct(r.get('fraction'))} | {target} |"
        )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


async def main_async(args: argparse.Namespace) -> int:
    device = "cpu" if args.dry_run else "cuda"
    started = time.monotonic()
    if args.dry_run:
        problems = {label: (1, code) for label, code in DRY_PROBLEMS.items()}
        copy_n, gelu_label = 1 << 22, "dry/gelu"
        gelu_source = DRY_GELU_CANDIDATE
    else:
        problems = kernelbench(args.kernelbench)
        copy_n = 1 << 28  # 1 GiB in, 1 GiB out: far beyond the L2
        gelu_label = next(label for label in problems if label.startswith("L1/88 "))
        gelu_source = (ROOT / "tools" / "candidates" / "gelu_tanh_cuda.py").read_text()
    settings = EvalSettings(baselines=("eager",), profile=False, sanitize=False)
    cache = Path(args.cache or tempfile.mkdtemp(prefix="sol-table-"))
    out: dict[str, Any] = {"device": device, "problems": [], "candidates": []}
    async with Evaluator(cache, settings) as ev:
        info = await ev.device_info(device)
        log(f"device {info.name}, torch {info.torch_version}; calibrating")
        probe = problem_from_source(COPY_PROBLEM.format(n=copy_n), "device_copy")
        await ev.check_problem(probe, device=device)
        t0 = time.monotonic()
        measured = await ev.sol_of(probe, as_evaluation(probe, {"default": _unit()}), device=device)
        peaks = measured.peaks if measured else None
        published = published_peaks(info.name) if device == "cuda" else None
        out["peaks"] = {"measured": peaks.model_dump(mode="json") if peaks else None,
                        "published": published.model_dump(mode="json") if published else None,
                        "seconds": round(time.monotonic() - t0, 1)}
        log(f"peaks: {peaks_table(peaks, published).splitlines()[2:5]}")
        for label, (level, code) in problems.items():
            compile_it = args.compile == "all" or (args.compile == "default" and level != 3)
            if compile_it and (args.dry_run or time.monotonic() - started > args.budget_s):
                compile_it = False
            log(f"{label}: {'eager and torch.compile' if compile_it else 'eager'}")
            try:
                problem = problem_from_source(code, label.split(" ", 1)[-1])
                row = await problem_row(ev, label, problem, device, compile_it)
            except Exception as exc:  # noqa: BLE001 - one problem's failure is a row, not the end
                row = {"problem": label, "error": f"{type(exc).__name__}: {exc}"}
            out["problems"].append(row)
            log(f"  -> {json.dumps(row, default=str)[:300]}")
        log("candidates: device copy, fused GELU")
        out["candidates"].append(
            await candidate_row(
                ev, "device copy (empty_like + copy_)", probe, COPY_CANDIDATE, device, COPY_TARGET
            )
        )
        gelu_problem = problem_from_source(problems[gelu_label][1], gelu_label.split(" ", 1)[-1])
        out["candidates"].append(
            await candidate_row(ev, f"{gelu_label}: fused GELU", gelu_problem, gelu_source, device, None)
        )
    out["seconds"] = round(time.monotonic() - started, 1)
    markdown = "\n\n".join([
        f"Device: {info.name} (torch {info.torch_version}); {out['seconds']} s in all.",
        "### Peaks\n\n" + peaks_table(peaks, published),
        "### Problems (figures per the first input set; SOL = floor / median time)\n\n"
        + problems_table(out["problems"]),
        "### Candidates through the evaluator\n\n" + candidates_table(out["candidates"]),
    ])
    print(markdown)
    folder = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sol_table.md").write_text(markdown + "\n", encoding="utf-8")
        (folder / "sol_table.json").write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    copy_ok = out["candidates"][0].get("verdict") == "PASS"
    return 0 if copy_ok and not any("error" in r for r in out["problems"]) else 1


def _unit() -> TimingStats:
    return TimingStats(median_ms=1.0, iqr_ms=0.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, samples=1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernelbench", type=Path,
                        default=ROOT.parent / "shared" / "kernelbench" / "problems.jsonl")
    parser.add_argument("--compile", choices=("default", "all", "none"), default="default",
                        help="torch.compile baselines: default skips level 3 (slow to compile)")
    parser.add_argument("--budget-s", type=float, default=210.0,
                        help="no torch.compile baseline starts after this many seconds")
    parser.add_argument("--cache", type=Path, default=None, help="evaluator cache (default: a fresh one)")
    parser.add_argument("--out", type=Path, default=None, help="folder for sol_table.md/json (default $OUT)")
    parser.add_argument("--dry-run", action="store_true", help="CPU, two tiny problems, no torch.compile")
    args = parser.parse_args()
    if not args.dry_run and not args.kernelbench.exists():
        raise SystemExit(f"no KernelBench JSONL at {args.kernelbench}; give --kernelbench PATH")
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
