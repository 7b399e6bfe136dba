#!/usr/bin/env python3
"""Benchmark the evaluator on a CUDA device: build cost, re-evaluation wall time, timer fidelity.

Three measurements (method and targets: docs/benchmarks/evaluator.md):
  1. cold build of a typical candidate through our pipeline (fresh cache dir) vs a plain
     ``load_inline`` of the same source in a fresh process with torch's default settings;
  2. wall time of re-evaluating that already-built candidate (result cache bypassed, baselines cached);
  3. our timer's median (the evaluator's own child-side Timer, called in-process) vs
     ``triton.testing.do_bench(..., return_mode="median")`` for three kernel sizes, and the spread
     ((max - min) / median) of our median over 5 repeats.

Prints one line per step and a markdown table; writes everything as JSON (``--json``). Each section
is independent: one failing is reported and the others still run. Run from the repository root:

    python3 tools/bench_evaluator.py --json bench_evaluator.json
    python3 tools/bench_evaluator.py --dry-run      # no GPU needed: checks imports, times a CPU op
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "cuda"
TIMER_PATH = ROOT / "stark_mcp" / "evaluator" / "child" / "sc_timing.py"
sys.path.insert(0, str(ROOT))

BUILD_PROBLEM = FIXTURES / "problem_matmul.py"
BUILD_CANDIDATE = FIXTURES / "cand_matmul_naive.py"

REEVAL_TARGET_S = 5.0
SPREAD_TARGET = 0.03  # for kernels of 100 us or more
SPREAD_MIN_MS = 0.100
AGREEMENT_TARGET = 0.05  # for kernels of 50 us or more
AGREEMENT_MIN_MS = 0.050

# fp32 out-of-place add moves 12 bytes per element: about 85 us, 0.34 ms and 1.3 ms at 3 TB/s.
CUDA_SIZES = (20 << 20, 80 << 20, 320 << 20)
CPU_SIZES = (1 << 16, 1 << 18, 1 << 20)  # dry run: exercises the same code on the CPU
# The evaluator's EvalSettings defaults for the timing fields, used if the package cannot be imported.
DEFAULT_TIMING = {"warmup_s": 0.05, "min_calls": 30, "min_time_s": 0.1, "max_time_s": 2.0,
                  "max_calls": 1000, "input_sets": 3}

PLAIN_BUILD = r"""
import json, sys, time
import torch
path = sys.argv[1]
t0 = time.perf_counter()
exec(compile(open(path, encoding="utf-8").read(), path, "exec"), {"__name__": "plain_candidate"})
print("PLAIN_BUILD_RESULT " + json.dumps({"build_s": time.perf_counter() - t0}), flush=True)
"""


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- pure helpers ---------------------------------------------------------------------------------

def spread(values: list[float]) -> float:
    """(max - min) / median: how far apart repeated medians land."""
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else float("inf")


def verdict(value: float | None, target: float, applies: bool) -> str:
    if not applies:
        return "n/a"
    if value is None:
        return "FAIL"
    return "PASS" if value <= target else "FAIL"


def timing_row(size: int, ours: list[float], reference: list[float] | None) -> dict[str, Any]:
    """One row of section 3 from our 5 medians and do_bench's medians (ms)."""
    our_median = statistics.median(ours)
    row: dict[str, Any] = {
        "elements": size,
        "our_medians_ms": ours,
        "our_median_ms": our_median,
        "spread": spread(ours),
    }
    gate_ms = our_median
    if reference:
        ref = statistics.median(reference)
        row.update(do_bench_medians_ms=reference, do_bench_median_ms=ref, ratio=our_median / ref,
                   agreement=abs(our_median / ref - 1.0))
        gate_ms = ref
    else:
        row.update(do_bench_medians_ms=None, do_bench_median_ms=None, ratio=None, agreement=None)
    row["spread_verdict"] = verdict(row["spread"], SPREAD_TARGET, gate_ms >= SPREAD_MIN_MS)
    row["agreement_verdict"] = verdict(row["agreement"], AGREEMENT_TARGET,
                                       reference is not None and gate_ms >= AGREEMENT_MIN_MS)
    return row


def fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def markdown(results: dict[str, Any]) -> str:
    lines = [f"Device: {results.get('device', '?')}; torch {results.get('torch', '?')}; "
             f"triton {results.get('triton', '—')}", ""]
    build = results.get("cold_build")
    if build is not None:
        lines += [f"| 1. cold build ({build.get('candidate', '?')}) | seconds |", "|---|---|"]
        if "error" in build:
            lines.append(f"| error | {build['error']} |")
        lines.append(f"| our pipeline: build phase | {fmt(build.get('ours_build_s'), '.1f')} |")
        lines.append(f"| our pipeline: whole first evaluation "
                     f"| {fmt(build.get('ours_first_eval_s'), '.1f')} |")
        lines.append(f"| plain load_inline: build inside the process "
                     f"| {fmt(build.get('plain_build_s'), '.1f')} |")
        lines.append(f"| plain load_inline: whole process | {fmt(build.get('plain_process_s'), '.1f')} |")
        lines.append(f"| ratio: our build phase / plain whole process | {fmt(build.get('ratio'), '.2f')} |")
        lines.append("")
    reeval = results.get("reevaluation")
    if reeval is not None:
        lines += [f"| 2. re-evaluation of the built candidate | wall s | target < {REEVAL_TARGET_S:g} s |",
                  "|---|---|---|"]
        if "error" in reeval:
            lines.append(f"| error | {reeval['error']} | FAIL |")
        statuses = reeval.get("statuses", [])
        for i, wall in enumerate(reeval.get("walls_s", [])):
            lines.append(f"| run {i + 1} ({statuses[i] if i < len(statuses) else '?'}) | {wall:.2f} | |")
        lines.append(f"| median | {fmt(reeval.get('median_s'), '.2f')} | {reeval.get('verdict', 'FAIL')} |")
        if reeval.get("phase_seconds"):
            phases = ", ".join(f"{k} {v:.2f}" for k, v in reeval["phase_seconds"].items())
            lines.append(f"| phases of the last run | {phases} | |")
        lines.append("")
    timing = results.get("timer", {})
    lines += ["| 3. elements (fp32 add) | our median ms | do_bench median ms | ratio | "
              "spread of 5 medians | spread <= 3% (>=100 us) | agreement <= 5% (>=50 us) |",
              "|---|---|---|---|---|---|---|"]
    if "error" in timing:
        lines.append(f"| error | {timing['error']} | | | | FAIL | FAIL |")
    for row in timing.get("rows", []):
        lines.append(
            f"| {row['elements']:,} | {row['our_median_ms']:.4f} | {fmt(row['do_bench_median_ms'], '.4f')} | "
            f"{fmt(row['ratio'], '.3f')} | {row['spread'] * 100:.2f}% | {row['spread_verdict']} | "
            f"{row['agreement_verdict']} |")
    if "empty_call_ms" in timing:
        lines.append(f"\nOur timer on an empty call (fixed per-call overhead): "
                     f"{timing['empty_call_ms'] * 1000:.1f} us median.")
    return "\n".join(lines)


# ---- section 1 and 2: the evaluator pipeline -----------------------------------------------------

def plain_build(candidate: Path, timeout_s: float) -> dict[str, float]:
    """``load_inline`` as a user would run it: fresh process, fresh extensions dir, torch defaults."""
    with tempfile.TemporaryDirectory(prefix="plain-ext-") as ext_dir:
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=ext_dir)
        env.pop("TORCH_CUDA_ARCH_LIST", None)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", PLAIN_BUILD, str(candidate)], env=env,
                              capture_output=True, text=True, timeout=timeout_s)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"plain load_inline failed (rc {proc.returncode}): {proc.stderr[-1500:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PLAIN_BUILD_RESULT "))
    return {"plain_build_s": json.loads(line.split(" ", 1)[1])["build_s"], "plain_process_s": wall}


async def first_evaluation(problem_path: Path, candidate_path: Path, cache: Path, timeout_s: float,
                           results: dict[str, Any], device: str = "cuda") -> None:
    """Section 1, our side: the whole first evaluation on a cold cache; its build phase is the number."""
    from stark_mcp.evaluator import EvalSettings, Evaluator
    from stark_mcp.problems import load_problem

    problem = load_problem(str(problem_path))
    source = candidate_path.read_text(encoding="utf-8")
    settings = EvalSettings(baselines=("eager",))
    async with Evaluator(cache_dir=cache, settings=settings) as ev:
        t0 = time.perf_counter()
        first = await asyncio.wait_for(
            ev.evaluate(problem, source, device=device, settings=settings), timeout_s)
        wall = time.perf_counter() - t0
    say(f"  our pipeline: {first.status.value}/{first.reason} in {wall:.1f}s, phases {first.phase_seconds}")
    results["cold_build"].update(
        ours_build_s=first.phase_seconds.get("build"), ours_first_eval_s=wall, ours_status=first.status.value,
        ours_phase_seconds=first.phase_seconds)


async def reevaluations(problem_path: Path, candidate_path: Path, cache: Path, repeats: int,
                        timeout_s: float, results: dict[str, Any], device: str = "cuda") -> None:
    """Section 2: the build and the eager baseline are on disk in ``cache``; the result cache is bypassed."""
    from stark_mcp.evaluator import EvalSettings, Evaluator
    from stark_mcp.problems import load_problem

    problem = load_problem(str(problem_path))
    source = candidate_path.read_text(encoding="utf-8")
    settings = EvalSettings(baselines=("eager",))
    walls: list[float] = []
    statuses: list[str] = []
    section: dict[str, Any] = {"candidate": candidate_path.name, "walls_s": walls, "statuses": statuses,
                               "target_s": REEVAL_TARGET_S}
    results["reevaluation"] = section
    async with Evaluator(cache_dir=cache, settings=settings) as ev:
        for i in range(repeats):
            t0 = time.perf_counter()
            last = await asyncio.wait_for(
                ev.evaluate(problem, source, device=device, settings=settings, use_cache=False), timeout_s)
            walls.append(time.perf_counter() - t0)
            statuses.append(last.status.value + (" (cached!)" if last.cached else ""))
            say(f"  re-evaluation {i + 1}: {statuses[-1]} in {walls[-1]:.2f}s, phases {last.phase_seconds}")
            section["phase_seconds"] = last.phase_seconds
    section["median_s"] = statistics.median(walls)
    honest = all(s == "passed" for s in statuses)
    section["verdict"] = verdict(section["median_s"], REEVAL_TARGET_S, True) if honest else "FAIL"


# ---- section 3: our timer vs do_bench -------------------------------------------------------------

def load_timer_class() -> Any:
    """The evaluator's child-side Timer, loaded by path: it needs only torch, not the package."""
    spec = importlib.util.spec_from_file_location("stark_bench_sc_timing", TIMER_PATH)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {TIMER_PATH}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Timer


def timing_settings() -> dict[str, Any]:
    try:
        from stark_mcp.evaluator import EvalSettings

        return dict(EvalSettings().timing_spec())
    except Exception as exc:  # the package needs pydantic; the timer does not
        say(f"  EvalSettings unavailable ({type(exc).__name__}: {exc}); using the documented defaults")
        return dict(DEFAULT_TIMING)


def timer_section(device: str, sizes: tuple[int, ...], repeats: int, results: dict[str, Any]) -> None:
    import torch

    Timer = load_timer_class()
    spec = timing_settings()
    do_bench: Callable[..., float] | None = None
    if device == "cuda":
        from triton.testing import do_bench as triton_do_bench

        do_bench = triton_do_bench
    timer = Timer(device, spec)
    rows = []
    empty = [statistics.median(timer.run(lambda: None, [[]])["samples_ms"]) for _ in range(repeats)]
    results["timer"] = {"settings": spec, "empty_call_ms": statistics.median(empty), "rows": rows}
    for size in sizes:
        sets = [[torch.randn(size, device=device), torch.randn(size, device=device),
                 torch.empty(size, device=device)] for _ in range(int(spec["input_sets"]))]

        def add(x: Any, y: Any, out: Any) -> Any:
            return torch.add(x, y, out=out)

        ours = [statistics.median(timer.run(add, sets)["samples_ms"]) for _ in range(repeats)]
        reference = None
        if do_bench is not None:
            x, y, out = sets[0]

            def plain_add(x: Any = x, y: Any = y, out: Any = out) -> None:
                torch.add(x, y, out=out)

            reference = [float(do_bench(plain_add, warmup=25, rep=100, return_mode="median"))
                         for _ in range(repeats)]
        row = timing_row(size, ours, reference)
        rows.append(row)
        say(f"  {size:,} elements: ours {row['our_median_ms']:.4f} ms (spread {row['spread'] * 100:.2f}%), "
            f"do_bench {fmt(row['do_bench_median_ms'], '.4f')} ms, ratio {fmt(row['ratio'], '.3f')}")
        del sets
        if device == "cuda":
            torch.cuda.empty_cache()


# ---- driver ---------------------------------------------------------------------------------------

def environment(results: dict[str, Any]) -> str:
    import torch

    results["torch"] = torch.__version__
    try:
        import triton

        results["triton"] = triton.__version__
    except Exception:
        results["triton"] = None
    if torch.cuda.is_available():
        results["device"] = torch.cuda.get_device_name(0)
        return "cuda"
    results["device"] = "cpu (no CUDA device)"
    return "cpu"


def run_section(name: str, results: dict[str, Any], fn: Callable[[], Any]) -> None:
    say(f"section {name} ...")
    t0 = time.perf_counter()
    try:
        fn()
    except BaseException as exc:  # keep going: the other sections are still worth having
        if isinstance(exc, KeyboardInterrupt):
            raise
        say(f"section {name} FAILED: {type(exc).__name__}: {exc}")
        results.setdefault(name, {})["error"] = f"{type(exc).__name__}: {exc}"[:1500]
    say(f"section {name} done in {time.perf_counter() - t0:.1f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write the results here (default: print only)")
    parser.add_argument("--markdown", type=Path, help="also write the markdown table here")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU needed: check imports and run section 3 on small CPU tensors")
    parser.add_argument("--repeats", type=int, default=5, help="repeats of our median (and of do_bench)")
    parser.add_argument("--reevals", type=int, default=3, help="re-evaluations timed in section 2")
    parser.add_argument("--section-timeout", type=float, default=150.0,
                        help="seconds allowed for any one evaluation or plain build")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    device = environment(results)
    say(f"device {results['device']}, torch {results['torch']}, triton {results['triton']}")
    if args.dry_run:
        import torch

        torch.set_num_threads(1)  # small CPU ops: extra threads only add noise on a shared machine

        def imports() -> None:
            from stark_mcp.evaluator import EvalSettings, Evaluator  # noqa: F401

            load_timer_class()
            results["imports"] = {"ok": True}

        run_section("imports", results, imports)
        run_section("timer", results, lambda: timer_section("cpu", CPU_SIZES, args.repeats, results))
    elif device != "cuda":
        say("no CUDA device: nothing to measure (use --dry-run to check this script without one)")
        return 2
    else:
        cache = Path(tempfile.mkdtemp(prefix="stark-bench-cache-"))

        def cold_build() -> None:
            section: dict[str, Any] = {"candidate": BUILD_CANDIDATE.name}
            results["cold_build"] = section
            errors = []
            try:
                section.update(plain_build(BUILD_CANDIDATE, args.section_timeout))
                say(f"  plain load_inline: build {section['plain_build_s']:.1f}s, "
                    f"process {section['plain_process_s']:.1f}s")
            except Exception as exc:  # still measure ours
                errors.append(f"plain: {type(exc).__name__}: {exc}")
            try:
                asyncio.run(first_evaluation(
                    BUILD_PROBLEM, BUILD_CANDIDATE, cache, args.section_timeout, results))
            except Exception as exc:
                errors.append(f"ours: {type(exc).__name__}: {exc}")
            if section.get("ours_build_s") and section.get("plain_process_s"):
                # Both sides counted alike: interpreter start, import torch, compile and link.
                section["ratio"] = section["ours_build_s"] / section["plain_process_s"]
            if errors:
                raise RuntimeError("; ".join(errors))

        run_section("cold_build", results, cold_build)
        run_section("reevaluation", results, lambda: asyncio.run(reevaluations(
            BUILD_PROBLEM, BUILD_CANDIDATE, cache, args.reevals, args.section_timeout, results)))
        run_section("timer", results, lambda: timer_section("cuda", CUDA_SIZES, args.repeats, results))
        shutil.rmtree(cache, ignore_errors=True)
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    table = markdown(results)
    print("\n" + table + "\n", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
        say(f"wrote {args.json}")
    if args.markdown:
        args.markdown.write_text(table + "\n", encoding="utf-8")
        say(f"wrote {args.markdown}")
    failed = [k for k, v in results.items() if isinstance(v, dict) and "error" in v]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
