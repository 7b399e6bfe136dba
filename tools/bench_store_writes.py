"""How many attempts a second the store can record: the ceiling of any scale-out (docs/scale.md).

usage: python tools/bench_store_writes.py [--attempts 300] [--writers 1 8] [--json FILE]

Each attempt is written the way the loop writes it: two LLM exchanges logged (a plan and a code
prompt of realistic size), the stored evaluation (``evaluate``), the node (``add_node``) and the
exchanges attached to it: five ``BEGIN IMMEDIATE`` transactions with ``synchronous=FULL``. ``--writers``
runs that many concurrent writers (tasks sharing one connection, as the server's clients share
one ``RunService``), each on its own run. Prints attempts per second and the p50/p95 of one
attempt's writes. Needs no GPU and no model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stark_mcp.problems import problem_from_source, source_hash  # noqa: E402
from stark_mcp.records import Action, Evaluation, Status, TimingStats, Usage  # noqa: E402
from stark_mcp.store import Store  # noqa: E402

PROBLEM = (ROOT / "examples" / "leaky_clamp" / "problem.py").read_text()
KERNEL = (ROOT / "examples" / "leaky_clamp" / "kernel_cpu.py").read_text()
PROMPT = "You are the code agent. " + "Context node source and evaluation. " * 400  # ~14 kB, as a real prompt


def _stats(ms: float) -> TimingStats:
    return TimingStats(
        median_ms=ms, iqr_ms=ms / 20, mean_ms=ms, min_ms=ms * 0.95, max_ms=ms * 1.2, samples=200
    )


async def _writer(store: Store, attempts: int, seed: int, latencies: list[float]) -> None:
    eager = _stats(1.0)
    run = await store.create_run(
        problem=problem_from_source(PROBLEM, name=f"leaky_clamp_{seed}"),
        device="cuda",
        policy={"name": "stark"},
        budget=attempts + 1,
        seed=seed,
        baselines={"eager": eager},
        root_evaluation=Evaluation(
            status=Status.PASSED, runtime=eager, baselines={"eager": eager}, device="cuda"
        ),
        config={"eval_settings": {}},
    )
    for n in range(1, attempts + 1):
        source = f"{KERNEL}\n# writer {seed} attempt {n}\n"
        evaluation = Evaluation(
            status=Status.PASSED,
            runtime=_stats(0.7),
            baselines={"eager": eager},
            speedups={"eager": 1 / 0.7},
            device="cuda",
            source_hash=source_hash(source),
            phase_seconds={"build": 30.0, "correctness": 1.0, "timing": 2.0},
        )
        started = time.perf_counter()
        exchanges = [
            await store.log_exchange(
                run_id=run.id,
                node_id=None,
                role=role,
                model="claude",
                request={"system": PROMPT, "messages": [{"role": "user", "content": PROMPT}]},
                reply=source,
                usage=Usage(input_tokens=9000, output_tokens=2500, calls=1),
            )
            for role in ("plan", "code")
        ]
        await store.save_evaluation(run.id, evaluation.source_hash, evaluation)
        node = await store.add_node(
            run.id, parent_id="n0", action=Action.PLAN, source=source, plan="advice", evaluation=evaluation
        )
        await store.attach_exchanges(run.id, [e.id for e in exchanges], node.id)
        latencies.append((time.perf_counter() - started) * 1e3)


async def measure(attempts: int, writers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        async with await Store.open(Path(tmp) / "stark.db") as store:
            latencies: list[float] = []
            per_writer = max(1, attempts // writers)
            started = time.perf_counter()
            await asyncio.gather(*(_writer(store, per_writer, seed, latencies) for seed in range(writers)))
            wall = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "writers": writers,
        "attempts": len(latencies),
        "attempts_per_s": len(latencies) / wall,
        "p50_ms": cuts[49],
        "p95_ms": cuts[94],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=300)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [asyncio.run(measure(args.attempts, w)) for w in args.writers]
    print(
        f"store write rate on {platform.node()} ({platform.processor() or platform.machine()}), "
        f"five transactions per attempt, synchronous=FULL\n"
    )
    print("| writers | attempts | attempts/s | p50 ms | p95 ms |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        cells = [
            r["writers"],
            r["attempts"],
            f"{r['attempts_per_s']:.0f}",
            f"{r['p50_ms']:.1f}",
            f"{r['p95_ms']:.1f}",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
