"""Throughput of `stark-mcp bench` on every GPU of a host against one GPU, and through Ray (docs/scale.md).

usage: python tools/bench_scale.py [--problems FILE] [--select 1/1,1/3,...] [--budget 8] [--kernels triton]
                                   [--legs all,0,ray] [--results FILE] [--out DIR] [--dry-run]

Runs the real CLI three times over the same 8 KernelBench problems (sampling, scripted replies,
eager baseline only, so the evaluator is the whole cost): `--gpus all`, `--gpus 0`, and
`--executor ray` (a local Ray cluster started on this host, one actor per GPU). Every attempt is
the problem's own module with its output passed through a Triton copy kernel of its own
(`--kernels triton`, the default: each attempt JIT-compiles and launches a kernel, as a real one
does; `--kernels reference` is the module renamed `ModelNew`), under a distinct comment, so each is
a real evaluation (build, correctness and timing on a GPU), never a cache hit; each leg has its own
STARK_HOME.
`--parallel` is left at its default (one expansion per evaluation worker). Prints attempts per
hour per leg and the ratios against the targets: `--gpus all` / `--gpus 0` at least 1.8 on two
GPUs (0.9 x the GPU count in general), Ray / local within 10%. Exit status 0 when both hold.
`--results FILE` keeps each leg's figures and reads back those of earlier calls, so the legs can
be split over several calls (`--legs 0`, then `--legs all,ray`) on one machine.
`--dry-run` needs no GPU: one CPU problem, budget 2, device cpu; it checks the script end to end
and prints the table with the targets marked n/a.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stark_mcp.bench import BenchSpec, plan_bench  # noqa: E402
from stark_mcp.evaluator import EvalSettings  # noqa: E402

KERNELBENCH = [
    ROOT / "shared" / "kernelbench" / "problems.jsonl",
    Path("/work/shared/kernelbench/problems.jsonl"),
]
# Four matmuls, two convolutions, a normalization, an activation: GPU-bound, inputs of 128-256 MB.
# Not the 4-8 GB elementwise and norm problems: at 25-35 s an evaluation they would make a leg outlast
# a device call, and they measure host-to-device copies more than the worker pool.
SELECT = "1/1,1/2,1/8,1/10,1/40,1/50,1/62,1/88"
DRY_PROBLEMS = ROOT / "tests" / "bench" / "fixtures" / "problems"
SCALE_TARGET = 0.9  # all GPUs / one GPU >= 0.9 x the GPU count (1.8 on two)
RAY_TOLERANCE = 0.10
LEG_TIMEOUT_S = 3000


TRITON_TAIL = """

import triton
import triton.language as tl


@triton.jit
def _bench_scale_copy(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


class ModelNew(_BenchScaleReference):
    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs).contiguous()
        copy = torch.empty_like(out)
        n = out.numel()
        _bench_scale_copy[(triton.cdiv(n, 1024),)](out, copy, n, BLOCK=1024)
        return copy
"""


def candidate(source: str, salt: str, kernels: str = "reference") -> str:
    """A distinct source for every attempt, correct by construction. ``reference``: the problem's
    module renamed ModelNew (no build); ``triton``: the module's output passed through a Triton copy
    kernel, so every attempt JIT-compiles and launches a kernel of its own, as a real attempt does."""
    if kernels == "triton":
        body = re.sub(r"\bModel\b", "_BenchScaleReference", source) + TRITON_TAIL
    else:
        body = re.sub(r"\bModel\b", "ModelNew", source)
    return body + f"\n# bench_scale {salt}\n"


def write_replies(path: Path, spec: BenchSpec, leg: str, kernels: str) -> int:
    """One generalist reply per attempt, each tied to its pair (so pairs run side by side, one per
    evaluation worker, and each still gets its own problem's module); returns the attempt count."""
    plan = plan_bench(spec)
    lines = []
    for pair in plan.pairs:
        for k in range(spec.budget):
            text = f"```python\n{candidate(pair.problem.source, f'{leg} {pair.key} {k}', kernels)}```\n"
            lines.append(json.dumps({"text": text, "role": "generalist", "pair": pair.id}))
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def run_leg(
    leg: str, flags: list[str], spec: BenchSpec, work: Path, device: str, kernels: str
) -> dict[str, object]:
    home, out, replies = work / leg / "home", work / leg / "out", work / leg / "replies.jsonl"
    home.mkdir(parents=True)
    attempts = write_replies(replies, spec.model_copy(update={"out": out}), leg, kernels)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "STARK_"))}
    env.update(STARK_HOME=str(home), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    command = [
        sys.executable, "-m", "stark_mcp", "bench", spec.problems,
        "--select", ",".join(spec.select), "--strategies", "sampling", "--budget", str(spec.budget),
        "--device", device, "--baselines", "eager",
        "--eval-settings", json.dumps(spec.eval_settings.model_dump(mode="json", exclude={"baselines"})),
        "--backend", f"scripted:{replies}", "--out", str(out), "--no-report", *flags,
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=LEG_TIMEOUT_S, check=False
    )
    wall = time.monotonic() - started
    rows = (
        [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        if out.exists()
        else []
    )
    recorded = sum(len(row.get("attempts") or []) for row in rows)
    return {
        "leg": leg,
        "flags": " ".join(flags),
        "exit": done.returncode,
        "attempts": recorded,
        "planned": attempts,
        "wall_s": wall,
        "per_hour": recorded / wall * 3600 if wall > 0 else 0.0,
        "stderr": done.stderr[-3000:],
    }


def gpu_count() -> int:
    probe = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    return int(done.stdout.strip() or 0)


def verdict(value: float | None, ok: bool | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f} " + ("n/a" if ok is None else "PASS" if ok else "FAIL")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=next((str(p) for p in KERNELBENCH if p.exists()), None))
    parser.add_argument("--select", default=SELECT)
    parser.add_argument("--budget", type=int, default=8, help="attempts per problem")
    parser.add_argument("--legs", default="all,0,ray", help="which legs: all, 0, ray")
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if "OUT" in os.environ else None)
    parser.add_argument("--results", type=Path, help="JSON file of legs, read and extended")
    parser.add_argument(
        "--kernels",
        choices=("triton", "reference"),
        default="triton",
        help="each attempt's code: the module through a Triton kernel of its own, or the module alone",
    )
    parser.add_argument("--dry-run", action="store_true", help="CPU, one tiny problem: checks the script")
    args = parser.parse_args()
    legs = [leg.strip() for leg in args.legs.split(",") if leg.strip()]
    if args.dry_run:
        problems, select, budget, device, gpus = str(DRY_PROBLEMS), ["scaled_relu"], 1, "cpu", 0
        args.kernels = "reference"  # no Triton without a GPU
        timing = {"trials": 2, "warmup_s": 0.0, "min_calls": 3, "min_time_s": 0.0, "max_time_s": 0.05}
    else:
        if args.problems is None:
            parser.error("--problems: no KernelBench problems.jsonl found; give its path")
        problems, select, budget, device, gpus = (
            args.problems,
            args.select.split(","),
            args.budget,
            "cuda",
            gpu_count(),
        )
        if gpus < 2:
            print(f"warning: {gpus} GPU(s) visible; the all/0 ratio needs two or more to mean anything")
        timing = {}
    spec = BenchSpec(
        problems=problems, select=select, strategies=["sampling"], budget=budget, device=device,
        out=Path("unused"), eval_settings=EvalSettings(baselines=("eager",), **timing),
    )  # fmt: skip
    flags = {"all": ["--gpus", "all"], "0": ["--gpus", "0"], "ray": ["--executor", "ray"]}
    results: dict[str, dict[str, object]] = {}
    if args.results is not None and args.results.exists():
        results = {leg: r for leg, r in json.loads(args.results.read_text()).items() if leg not in legs}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        for leg in legs:
            if leg == "ray":
                try:
                    import ray  # noqa: F401
                except ImportError:
                    print("ray leg skipped: Ray is not installed here (pip install 'stark-mcp[ray]')")
                    continue
            print(f"leg {leg}: stark-mcp bench {' '.join(flags[leg])} ...", flush=True)
            results[leg] = run_leg(leg, flags[leg], spec, work, device, args.kernels)
            r = results[leg]
            print(
                f"  exit {r['exit']}, {r['attempts']}/{r['planned']} attempts in {r['wall_s']:.0f} s",
                flush=True,
            )
            if r["exit"] != 0:
                print(r["stderr"])
            if args.results is not None:
                args.results.write_text(json.dumps(results, indent=2) + "\n")
    print("\n| leg | flags | attempts | wall s | attempts/hour |")
    print("|---|---|---:|---:|---:|")
    for r in results.values():
        print(f"| {r['leg']} | `{r['flags']}` | {r['attempts']} | {r['wall_s']:.0f} | {r['per_hour']:.0f} |")
    rate = {leg: float(r["per_hour"]) for leg, r in results.items() if r["exit"] == 0 and r["attempts"]}
    scale = rate["all"] / rate["0"] if {"all", "0"} <= rate.keys() else None
    ray_ratio = rate["ray"] / rate["all"] if {"all", "ray"} <= rate.keys() else None
    scale_ok = None if args.dry_run or scale is None else scale >= SCALE_TARGET * max(gpus, 1)
    ray_ok = None if args.dry_run or ray_ratio is None else abs(ray_ratio - 1.0) <= RAY_TOLERANCE
    print("\n| ratio | value | target |\n|---|---|---|")
    print(f"| --gpus all / --gpus 0 | {verdict(scale, scale_ok)} | >= {SCALE_TARGET * max(gpus, 2):.1f} |")
    print(
        f"| --executor ray / local (all GPUs) | {verdict(ray_ratio, ray_ok)} | 1.00 +- {RAY_TOLERANCE:.2f} |"
    )
    failed = [leg for leg, r in results.items() if r["exit"] != 0 or r["attempts"] != r["planned"]]
    if failed:
        print(f"\nlegs that did not record every attempt: {', '.join(failed)}")
    return 1 if failed or scale_ok is False or ray_ok is False else 0


if __name__ == "__main__":
    sys.exit(main())
