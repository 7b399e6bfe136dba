"""The store under real processes: a writer killed with SIGKILL, and two writers at once."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from stark_mcp.problems import Problem
from stark_mcp.records import Action, RunRecord
from stark_mcp.store import MIGRATIONS, Store

from .helpers import PROBLEM_SOURCE

pytestmark = pytest.mark.anyio

WRITER = Path(__file__).with_name("writer.py")


async def start_writer(
    db: Path, run_id: str, *, count: int, tag: str, payload: int = 0, go: Path | None = None,
    pause: float = 0.0,
) -> asyncio.subprocess.Process:
    barrier = ["--go", str(go)] if go is not None else []
    return await asyncio.create_subprocess_exec(
        sys.executable, str(WRITER), "--db", str(db), "--run", run_id, "--count", str(count),
        "--tag", tag, "--payload", str(payload), "--pause", str(pause), *barrier,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def parse(lines: list[str]) -> list[tuple[str, float]]:
    return [(node_id, float(seconds)) for node_id, seconds in (line.split() for line in lines)]


def someone_holds_the_write_lock(db: Path) -> bool:
    """True when another connection is inside a write transaction right now."""
    raw = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        raw.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc):
            return True
        raise
    else:
        raw.execute("ROLLBACK")
        return False
    finally:
        raw.close()


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as raw:
        return raw.execute("PRAGMA integrity_check").fetchone()[0]


async def new_run(db: Path, problem: Problem) -> RunRecord:
    async with await Store.open(db) as store:
        run = await store.create_run(problem=problem, device="cpu", policy={}, budget=500, seed=1)
        await store.add_node(run.id, parent_id=None, action=Action.ROOT, source=PROBLEM_SOURCE)
        return run


async def test_kill_9_loses_nothing_committed_and_the_run_resumes(db_path: Path, problem: Problem) -> None:
    run = await new_run(db_path, problem)
    # Large sources keep each transaction open for a few milliseconds, a target for the kill.
    writer = await start_writer(db_path, run.id, count=0, tag="doomed", payload=200_000)
    reported: list[str] = []
    assert writer.stdout is not None
    async with asyncio.timeout(30):
        while len(reported) < 25:
            line = await writer.stdout.readline()
            assert line, (await writer.stderr.read()).decode() if writer.stderr else "writer exited"
            reported.append(line.decode())
    # Aim the kill at an open transaction: wait until the writer holds the write lock.
    deadline = time.monotonic() + 10
    while not (caught_mid_write := someone_holds_the_write_lock(db_path)) and time.monotonic() < deadline:
        pass
    writer.send_signal(signal.SIGKILL)
    assert await writer.wait() == -signal.SIGKILL
    assert caught_mid_write, "never saw the writer inside a transaction"
    # Anything printed between our last read and the kill was committed too.
    reported += (await writer.stdout.read()).decode().splitlines()
    committed = [node_id for node_id, _ in parse(reported)]

    assert integrity(db_path) == "ok"
    async with await Store.open(db_path) as store:
        ids = [n.id for n in await store.nodes(run.id)]
        assert set(committed) <= set(ids)
        assert len(ids) - 1 - len(committed) in (0, 1)  # at most the one whose id we never saw
        assert ids == [f"n{i}" for i in range(len(ids))]

    resumed = await start_writer(db_path, run.id, count=3, tag="resumed")
    out, err = await asyncio.wait_for(resumed.communicate(), 30)
    assert resumed.returncode == 0, err.decode()
    new_ids = [node_id for node_id, _ in parse(out.decode().splitlines())]
    assert new_ids == [f"n{i}" for i in range(len(ids), len(ids) + 3)]

    assert integrity(db_path) == "ok"
    async with await Store.open(db_path) as store:
        nodes = await store.nodes(run.id)
    assert [n.seq for n in nodes] == list(range(len(ids) + 3))
    assert all(n.source.startswith("# resumed") for n in nodes[-3:])


async def test_two_processes_write_one_run_concurrently(db_path: Path, problem: Problem) -> None:
    run = await new_run(db_path, problem)
    go = db_path.with_name("go")
    # SQLite's lock is not fair: a writer committing in a tight loop can hold off another for its
    # whole loop. Real writers work (LLM calls, evaluations) between commits; a short pause
    # stands in for that work.
    writers = [
        await start_writer(db_path, run.id, count=50, tag=tag, go=go, pause=0.004)
        for tag in ("server", "cli")
    ]
    for writer in writers:
        assert writer.stdout is not None
        assert await asyncio.wait_for(writer.stdout.readline(), 30) == b"ready\n"
    started = time.monotonic()
    go.touch()

    async def read_while_writing() -> int:
        # A third party reading throughout must never be refused: WAL readers do not block.
        reads = 0
        async with await Store.open(db_path) as reader:
            while any(w.returncode is None for w in writers):
                await reader.nodes(run.id)
                reads += 1
                await asyncio.sleep(0.01)
        return reads

    reader_task = asyncio.create_task(read_while_writing())
    results = await asyncio.wait_for(asyncio.gather(*(w.communicate() for w in writers)), 60)
    reads = await reader_task
    elapsed = time.monotonic() - started

    outputs: list[list[tuple[str, float]]] = []
    for writer, (out, err) in zip(writers, results, strict=True):
        assert writer.returncode == 0, err.decode()
        assert "locked" not in err.decode()
        outputs.append(parse(out.decode().splitlines()))
    server_ids = {node_id for node_id, _ in outputs[0]}
    cli_ids = {node_id for node_id, _ in outputs[1]}
    assert len(server_ids) == len(cli_ids) == 50
    assert not server_ids & cli_ids

    async with await Store.open(db_path) as store:
        nodes = await store.nodes(run.id)
    assert [n.seq for n in nodes] == list(range(101))
    assert {n.id for n in nodes[1:]} == server_ids | cli_ids
    assert sum(n.source.startswith("# server") for n in nodes) == 50
    # The writers really overlapped: their nodes interleave rather than forming two blocks.
    tags = [n.source.split()[1] for n in nodes[1:]]
    assert sum(a != b for a, b in itertools.pairwise(tags)) > 10
    assert integrity(db_path) == "ok"
    # No write waited anywhere near the busy timeout, and the whole exchange was quick.
    slowest = max(seconds for output in outputs for _, seconds in output)
    assert slowest < 2.0, f"an add_node waited {slowest:.2f}s for the other writer"
    assert elapsed < 10, f"two writers took {elapsed:.1f}s"
    assert reads > 0


OPENER = """
import asyncio, pathlib, sys, time
from stark_mcp.store import Store

async def main():
    go = pathlib.Path(sys.argv[2])
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.0005)
    async with await Store.open(sys.argv[1]):
        pass

asyncio.run(main())
"""


async def test_processes_opening_a_fresh_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    db, go = tmp_path / "fresh.db", tmp_path / "go"
    openers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", OPENER, str(db), str(go),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(4)
    ]
    for opener in openers:
        assert opener.stdout is not None
        assert await asyncio.wait_for(opener.stdout.readline(), 30) == b"ready\n"
    go.touch()
    results = await asyncio.wait_for(asyncio.gather(*(o.communicate() for o in openers)), 30)
    for opener, (_, err) in zip(openers, results, strict=True):
        assert opener.returncode == 0, err.decode()
    with sqlite3.connect(db) as raw:
        numbers = raw.execute("SELECT number FROM schema_migrations").fetchall()
        assert numbers == [(m.number,) for m in MIGRATIONS]
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert integrity(db) == "ok"
