"""Test helper run as a subprocess: adds nodes to one run and reports each commit.

Prints ``<node id> <seconds add_node took>`` per node, flushed, only after
``add_node`` has returned (that is, after the commit), so every id a test reads
from stdout is durably in the database. ``--count 0`` writes until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from stark_mcp.records import Action, Evaluation, Status, TimingStats, Usage
from stark_mcp.store import Store


async def write(
    db: str, run_id: str, parent: str, count: int, tag: str, payload: int, go: Path | None, pause: float
) -> None:
    filler = "# " + "x" * 78 + "\n"
    async with await Store.open(db) as store:
        if go is not None:
            # A start line, so that several writers really overlap instead of racing start-up.
            print("ready", flush=True)
            while not go.exists():
                await asyncio.sleep(0.002)
        i = 0
        while count == 0 or i < count:
            source = f"# {tag} attempt {i}\n" + filler * (payload // len(filler))
            evaluation = Evaluation(
                status=Status.PASSED,
                runtime=TimingStats(
                    median_ms=1.0 + i, iqr_ms=0.1, mean_ms=1.0 + i, min_ms=1.0, max_ms=2.0 + i, samples=5
                ),
            )
            started = time.perf_counter()
            node = await store.add_node(
                run_id, parent_id=parent, action=Action.PLAN, source=source, plan=f"{tag} plan {i}",
                evaluation=evaluation, usage=Usage(input_tokens=i, calls=1),
            )
            print(node.id, f"{time.perf_counter() - started:.4f}", flush=True)
            i += 1
            if pause:
                await asyncio.sleep(pause)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--parent", default="n0")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--tag", default="writer")
    parser.add_argument("--payload", type=int, default=0, help="bytes of filler in each source")
    parser.add_argument("--go", type=Path, help="print 'ready', then wait for this file to exist")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between writes (the 'work')")
    args = parser.parse_args()
    asyncio.run(
        write(args.db, args.run, args.parent, args.count, args.tag, args.payload, args.go, args.pause)
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
