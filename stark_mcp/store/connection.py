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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite
import anyio

from stark_mcp.store.errors import StoreError

BUSY_TIMEOUT_S = 5.0


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
        async with conn.execute("PRAGMA journal_mode = WAL") as cur:
            row = await cur.fetchone()
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


@asynccontextmanager
async def write_transaction(conn: aiosqlite.Connection, lock: asyncio.Lock) -> AsyncIterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any exception or cancellation.

    The lock keeps two coroutines sharing ``conn`` from interleaving their statements;
    BEGIN IMMEDIATE takes the database write lock up front so a transaction that has read
    never fails later when it tries to write (SQLITE_BUSY_SNAPSHOT).
    """
    async with lock:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            await conn.execute("COMMIT")
        except BaseException:
            # Shielded: under a cancelled scope the rollback must still run, or the shared
            # connection stays inside a transaction and every later write fails.
            with anyio.CancelScope(shield=True):
                await _rollback_if_open(conn)
            raise


async def _rollback_if_open(conn: aiosqlite.Connection) -> None:
    try:
        await conn.execute("ROLLBACK")
    except sqlite3.OperationalError:
        # A cancelled COMMIT may already have run on aiosqlite's thread: nothing left to undo.
        pass
