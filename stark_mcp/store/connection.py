"""Opening the SQLite file and running short write transactions on it.

Durability and sharing choices, made once here:

- WAL journal: readers never block the writer and the writer never blocks readers, so a
  server and a CLI can share one file; a ``kill -9`` mid-write leaves only an uncommitted
  WAL tail, which SQLite discards on the next open.
- ``synchronous=FULL``: every commit is fsynced, so a committed attempt survives a power cut
  too, not only a process crash (NORMAL would survive ``kill -9`` but may lose the last
  commits on power loss). An attempt costs LLM tokens and minutes of GPU time and we commit a
  few per minute, so one fsync per commit costs nothing that matters.
- ``busy_timeout``: a writer that finds another process's write transaction open waits (SQLite
  retries with backoff) instead of failing with "database is locked". Every write transaction
  starts with ``BEGIN IMMEDIATE`` and holds the lock for a few statements only, so waits are
  milliseconds; the timeout is a generous ceiling, not an expected wait.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from stark_mcp.store.errors import StoreError

BUSY_TIMEOUT_S = 5.0
T = TypeVar("T")


async def connect(path: Path) -> aiosqlite.Connection:
    """An autocommit connection (we issue BEGIN/COMMIT ourselves) with the pragmas above."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = await aiosqlite.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open database {path}: {exc}") from None
    try:
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        row = await _enter_wal(conn)
        if row is None or str(row[0]).lower() != "wal":
            raise StoreError(f"cannot put {path} in WAL mode (journal_mode is {row[0] if row else None})")
        await conn.execute("PRAGMA synchronous = FULL")
        await conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.DatabaseError as exc:
        await conn.close()
        raise StoreError(f"cannot use database {path}: {exc}") from None
    except BaseException:
        await conn.close()
        raise
    return conn


async def _enter_wal(conn: aiosqlite.Connection) -> Any:
    """``PRAGMA journal_mode = WAL``, waiting out another process that is converting the same fresh
    file: SQLite answers that pragma "database is locked" at once, without its busy handler."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BUSY_TIMEOUT_S
    while True:
        try:
            async with conn.execute("PRAGMA journal_mode = WAL") as cur:
                return await cur.fetchone()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or loop.time() > deadline:
                raise
            await asyncio.sleep(0.02)


async def run_write(conn: aiosqlite.Connection, lock: asyncio.Lock, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` (statements on ``conn``) as one ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction.

    Safe against cancellation by construction: once the write holds ``lock``, it runs in a task
    of its own that the caller's cancellation cannot reach, so it commits whole or rolls back
    whole before the lock is released, and the shared connection is never left inside a
    transaction. A caller cancelled while waiting for the lock writes nothing; one cancelled
    later gets ``CancelledError`` at once while its write finishes (anything that uses the
    store next waits for the lock, so it sees the write's outcome).

    The lock keeps two coroutines sharing ``conn`` from interleaving their statements;
    BEGIN IMMEDIATE takes the database write lock up front so a transaction that has read
    never fails later when it tries to write (SQLITE_BUSY_SNAPSHOT).
    """
    await lock.acquire()
    try:
        task = asyncio.get_running_loop().create_task(_transaction(conn, lock, work))
    except BaseException:
        lock.release()
        raise
    _WRITES.add(task)
    task.add_done_callback(_forget)
    return await asyncio.shield(task)


# Strong references to writes in flight: the event loop keeps only weak ones, and a write whose
# caller has gone must still run to its end.
_WRITES: set[asyncio.Task[Any]] = set()


def _forget(task: asyncio.Task[Any]) -> None:
    _WRITES.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved here, so an abandoned write's error is not reported as unhandled


async def _transaction(conn: aiosqlite.Connection, lock: asyncio.Lock, work: Callable[[], Awaitable[T]]) -> T:
    try:
        try:
            await conn.execute("BEGIN IMMEDIATE")
            result = await work()
            await conn.execute("COMMIT")
        except BaseException:
            # Only the event loop shutting down can cancel this task; even then, undo what began.
            await _rollback_if_open(conn)
            raise
        return result
    finally:
        lock.release()


async def _rollback_if_open(conn: aiosqlite.Connection) -> None:
    # Sent through aiosqlite's queue, so it runs after any statement still queued (a cancelled
    # await does not unqueue it); "no transaction is active" means the BEGIN never ran or the
    # COMMIT did, and there is nothing to undo.
    try:
        await conn.execute("ROLLBACK")
    except sqlite3.OperationalError:
        pass
