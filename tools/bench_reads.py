"""How long the MCP calls that evaluate nothing take on large trees, through a real stdio client.

usage: python tools/bench_reads.py [--nodes 1000 10000] [--calls 40] [--json FILE] [--markdown FILE]

For each size it writes a run of that many attempts straight into a fresh database (realistic
sources, plans and evaluations; a random tree with a third of the attempts failing), starts
``stark-mcp serve`` on it as a subprocess, and times every call that does not evaluate
(``add_child`` reusing an ``evaluation_id`` included) from an ``mcp.Client`` over stdio: ``--calls``
times each after one warm-up call, p50 and p95 in milliseconds. It prints a markdown table with
PASS/FAIL against the targets (p95 under 50 ms at 1,000 nodes, under 200 ms at 10,000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402

from stark_mcp.problems import problem_from_source, source_hash  # noqa: E402
from stark_mcp.records import Action, Evaluation, Node, Status, TimingStats, Usage  # noqa: E402
from stark_mcp.store import Store, codec  # noqa: E402

TARGET_P95_MS = {1000: 50.0, 10000: 200.0}
PROBLEM = (ROOT / "examples" / "leaky_clamp" / "problem.py").read_text()
KERNEL = (ROOT / "examples" / "leaky_clamp" / "kernel_cpu.py").read_text()
BEGIN, END = "# <<<IMPROVE BEGIN>>>", "# <<<IMPROVE END>>>"


def timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=ms / 20, mean_ms=ms, min_ms=ms * 0.95, max_ms=ms * 1.2,
        samples=200)


def evaluation(rng: random.Random, source: str, eager: TimingStats) -> Evaluation:
    if rng.random() < 1 / 3:
        return Evaluation(
            status=Status.BUILD_ERROR, reason="compile", message="error: expected ';' before '}' token",
            logs={"build": "main.cpp:12:5: error: expected ';' before '}' token\n" * 20},
            device="cpu", source_hash=source_hash(source),
        )
    ms = rng.uniform(0.2, 2.0) * eager.median_ms
    return Evaluation(
        status=Status.PASSED, runtime=timing(ms), baselines={"eager": eager},
        speedups={"eager": eager.median_ms / ms}, device="cpu", source_hash=source_hash(source),
        phase_seconds={"build": 30.0, "correctness": 1.0, "timing": 2.0},
    )


def anchored(source: str) -> str:
    """A plan on ``source`` whose one span is its first ``return`` line."""
    lines = source.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("return"))
    pad = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    scaffold = "\n".join([*lines[:at], pad + BEGIN, lines[at], pad + END, *lines[at + 1 :]])
    return f"## Advice\nFuse the clamp into the loop.\n\n## Scaffold\n```python\n{scaffold}\n```\n"


async def write_run(db: Path, nodes: int, seed: int = 0) -> tuple[str, list[str]]:
    """A run of ``nodes`` attempts; returns its id and spare sources with stored evaluations."""
    rng = random.Random(seed)
    eager = timing(1.0)
    async with await Store.open(db) as store:
        run = await store.create_run(
            problem=problem_from_source(PROBLEM, name="leaky_clamp"), device="cpu",
            policy={"name": "stark"}, budget=nodes + 1000, seed=seed, baselines={"eager": eager},
            root_evaluation=Evaluation(status=Status.PASSED, runtime=eager, baselines={"eager": eager},
                                       speedups={"eager": 1.0}, device="cpu"),
            config={"eval_settings": {}},
        )
        spares = [KERNEL + f"\n# spare {i}\n" for i in range(400)]
        for source in spares:
            await store.save_evaluation(run.id, source_hash(source),
                evaluation(random.Random(1), source, eager))
    rows = []
    plan = anchored(PROBLEM)
    for seq in range(1, nodes + 1):
        parent = rng.randrange(max(0, seq - 50), seq) if rng.random() < 0.8 else rng.randrange(seq)
        source = KERNEL + f"\n# attempt {seq}\n"
        node = Node(
            id=f"n{seq}", run_id=run.id, parent_id=f"n{parent}", seq=seq,
            action=Action.DEBUG if rng.random() < 0.3 else Action.PLAN, plan=plan, source=source,
            evaluation=evaluation(rng, source, eager),
            usage=Usage(input_tokens=9000, output_tokens=2500, calls=2),
            adherence=rng.random(), created_at=time.time(),
        )
        rows.append(codec.node_columns(node))
    with sqlite3.connect(db) as conn:  # one transaction: a benchmark fixture, not an attempt at a time
        names = ", ".join(rows[0])
        marks = ", ".join(f":{name}" for name in rows[0])
        conn.executemany(f"INSERT INTO nodes ({names}) VALUES ({marks})", rows)
    return run.id, spares


Call = Callable[[], Awaitable[Any]]


async def measure(call: Call, times: int, before: Call | None = None) -> list[float]:
    """``times`` timings of ``call`` after one warm-up; ``before`` runs (untimed) ahead of each."""
    await call()  # warm-up: first use of the run loads its tree
    samples = []
    for _ in range(times):
        if before is not None:
            await before()
        started = time.perf_counter()
        result = await call()
        samples.append((time.perf_counter() - started) * 1e3)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"call failed: {result.content}")
    return samples


def quantile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[int(q * 100) - 1]


async def bench(nodes: int, calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="stark-bench-reads-") as home:
        db = Path(home) / "stark.db"
        started = time.perf_counter()
        run_id, spares = await write_run(db, nodes)
        built_s = time.perf_counter() - started
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT id, source_hash FROM evaluations")
            evaluation_ids = {digest: evaluation_id for evaluation_id, digest in rows}
        env = {**os.environ, "STARK_HOME": home, "PYTHONPATH": str(ROOT)}
        params = StdioServerParameters(command=sys.executable, args=["-m", "stark_mcp", "serve"], env=env,
            cwd=home)
        async with Client(params) as client:
            node_ids = [f"n{i}" for i in range(1, nodes + 1)]
            rng = random.Random(1)
            plan = anchored(PROBLEM)
            spare = iter(spares)

            def tool(name: str, args: Callable[[], dict[str, Any]]) -> Callable[[], Awaitable[Any]]:
                return lambda: client.call_tool(name, args())

            def resource(uri: Callable[[], str]) -> Callable[[], Awaitable[Any]]:
                return lambda: client.read_resource(uri())

            def add_child() -> dict[str, Any]:
                source = next(spare)
                return {"run_id": run_id, "parent_id": "n0", "source": source, "action": "debug",
                        "evaluation_id": evaluation_ids[source_hash(source)]}

            cases: dict[str, Call | tuple[Call, Call]] = {
                "select_node": tool("select_node", lambda: {"run_id": run_id}),
                "build_context plan": tool("build_context", lambda: {
                    "run_id": run_id, "node_id": rng.choice(node_ids), "role": "plan"}),
                "build_context code": tool("build_context", lambda: {
                    "run_id": run_id, "node_id": "n0", "role": "code", "plan": plan}),
                "build_context debug": tool("build_context", lambda: {
                    "run_id": run_id, "node_id": rng.choice(node_ids), "role": "debug"}),
                "leaderboard": tool("leaderboard", lambda: {"run_id": run_id}),
                "get_node": tool("get_node", lambda: {"run_id": run_id, "node_id": rng.choice(node_ids)}),
                "list_runs": tool("list_runs", dict),
                "export_kernel": tool("export_kernel", lambda: {"run_id": run_id}),
                "add_child (reused evaluation)": tool("add_child", add_child),
                "resource node source": resource(lambda: f"stark://runs/{run_id}/nodes/{rng.choice(node_ids)}/source"),
                "resource node logs": resource(lambda: f"stark://runs/{run_id}/nodes/{rng.choice(node_ids)}/logs"),
                "resource best": resource(lambda: f"stark://runs/{run_id}/best"),
                "resource tree": resource(lambda: f"stark://runs/{run_id}/tree"),
                # The tree document is rendered once per version of the tree: time it after a write.
                "resource tree, after add_child": (
                    tool("add_child", add_child), resource(lambda: f"stark://runs/{run_id}/tree")
                ),
            }
            results = {}
            for name, case in cases.items():
                before, call = case if isinstance(case, tuple) else (None, case)
                samples = await measure(call, calls, before)
                results[name] = {"p50_ms": round(quantile(samples, 0.5), 2),
                    "p95_ms": round(quantile(samples, 0.95), 2)}
    return {"nodes": nodes, "calls": calls, "database_s": round(built_s, 1), "results": results}


def markdown(reports: list[dict[str, Any]]) -> str:
    lines = []
    for report in reports:
        nodes = report["nodes"]
        target = TARGET_P95_MS.get(nodes)
        lines += [f"### {nodes:,} nodes ({report['calls']} calls each, after one warm-up)", "",
                  "| call | p50 ms | p95 ms | target p95 | |", "|---|---:|---:|---:|---|"]
        for name, row in report["results"].items():
            verdict = "" if target is None else ("PASS" if row["p95_ms"] < target else "FAIL")
            shown = f"{target:g}" if target is not None else "-"
            lines.append(f"| {name} | {row['p50_ms']:.1f} | {row['p95_ms']:.1f} | {shown} | {verdict} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    reports = [asyncio.run(bench(n, args.calls)) for n in args.nodes]
    machine = f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}"
    table = markdown(reports)
    print(f"{machine}\n\n{table}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "reports": reports}, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(table + "\n")


if __name__ == "__main__":
    main()
