"""Numbered, forward-only schema migrations.

Each migration is applied once, inside one write transaction together with its
row in ``schema_migrations``, so a crash mid-migration leaves the previous
schema intact. Never edit or renumber a migration that has shipped: append a
new one. Statements are listed one by one because ``executescript`` would
commit the surrounding transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import aiosqlite

from stark_mcp.store.connection import run_write
from stark_mcp.store.errors import StoreError


@dataclass(frozen=True)
class Migration:
    number: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs, nodes, stand-alone evaluations and LLM exchanges",
        (
            """
            CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                problem_json TEXT NOT NULL,
                problem_hash TEXT NOT NULL,
                device TEXT NOT NULL,
                strategy TEXT NOT NULL,
                policy_json TEXT NOT NULL,
                budget INTEGER NOT NULL,
                seed INTEGER NOT NULL,
                config_json TEXT NOT NULL,
                baselines_json TEXT NOT NULL,
                status TEXT NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )
            """,
            "CREATE INDEX runs_by_created ON runs (created_at)",
            # score is the median runtime in ms, or IEEE +inf for anything that did not pass:
            # SQLite stores and sorts +inf as a REAL, so ORDER BY score needs no special case.
            """
            CREATE TABLE nodes (
                run_id TEXT NOT NULL REFERENCES runs (id),
                id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                parent_id TEXT,
                action TEXT NOT NULL CHECK (action IN ('root', 'plan', 'debug')),
                plan TEXT,
                source TEXT NOT NULL,
                evaluation_json TEXT,
                status TEXT,
                score REAL NOT NULL,
                usage_json TEXT NOT NULL,
                adherence REAL,
                created_at REAL NOT NULL,
                PRIMARY KEY (run_id, id),
                UNIQUE (run_id, seq),
                FOREIGN KEY (run_id, parent_id) REFERENCES nodes (run_id, id),
                CHECK ((action = 'root') = (parent_id IS NULL))
            )
            """,
            "CREATE UNIQUE INDEX nodes_one_root ON nodes (run_id) WHERE action = 'root'",
            "CREATE INDEX nodes_by_score ON nodes (run_id, score)",
            """
            CREATE TABLE evaluations (
                id TEXT PRIMARY KEY,
                run_id TEXT NOT NULL REFERENCES runs (id),
                source_hash TEXT NOT NULL,
                evaluation_json TEXT NOT NULL,
                created_at REAL NOT NULL
            )
            """,
            "CREATE INDEX evaluations_by_source ON evaluations (run_id, source_hash)",
            """
            CREATE TABLE exchanges (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                run_id TEXT NOT NULL REFERENCES runs (id),
                node_id TEXT,
                role TEXT NOT NULL,
                model TEXT NOT NULL,
                request_json TEXT NOT NULL,
                reply TEXT NOT NULL,
                usage_json TEXT NOT NULL,
                error TEXT,
                created_at REAL NOT NULL,
                FOREIGN KEY (run_id, node_id) REFERENCES nodes (run_id, id)
            )
            """,
            "CREATE INDEX exchanges_by_node ON exchanges (run_id, node_id, id)",
        ),
    ),
    Migration(
        2,
        "profiles taken on demand after a node was recorded",
        (
            """
            CREATE TABLE profiles (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                run_id TEXT NOT NULL REFERENCES runs (id),
                node_id TEXT NOT NULL,
                profile_json TEXT NOT NULL,
                created_at REAL NOT NULL,
                FOREIGN KEY (run_id, node_id) REFERENCES nodes (run_id, id)
            )
            """,
            "CREATE INDEX profiles_by_run ON profiles (run_id, seq)",
        ),
    ),
    Migration(
        3,
        "run language, baselines still being timed, and a revision for rewritten nodes",
        (
            "ALTER TABLE runs ADD COLUMN language TEXT NOT NULL DEFAULT 'cuda'",
            # Runs made before languages existed wrote C++ on the CPU and CUDA C++ elsewhere.
            "UPDATE runs SET language = 'cpp' WHERE device = 'cpu' OR device LIKE 'cpu:%'",
            "ALTER TABLE runs ADD COLUMN pending_baselines_json TEXT NOT NULL DEFAULT '[]'",
            # Bumped whenever nodes already written are rewritten (late baselines fill in their
            # speedups), so a reader holding a tree knows to read it again whole.
            "ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    Migration(
        4,
        "who drives each running run: a process (pid, start time, host) and its session",
        (
            # A run left 'running' by a process that is gone (killed, or its MCP client hung up
            # and the session closed) is found by this row and marked 'interrupted'.
            """
            CREATE TABLE run_owners (
                run_id TEXT PRIMARY KEY REFERENCES runs (id),
                pid INTEGER NOT NULL,
                started TEXT NOT NULL,
                host TEXT NOT NULL,
                session TEXT NOT NULL,
                claimed_at REAL NOT NULL
            )
            """,
        ),
    ),
    Migration(
        5,
        "memory across runs: what each finished run learned, for the planner of a similar problem",
        (
            # Not tied to runs by a foreign key: an entry outlives a deleted run (and `memory clear`
            # removes entries only).
            """
            CREATE TABLE memory (
                run_id TEXT PRIMARY KEY,
                problem_hash TEXT NOT NULL,
                entry_json TEXT NOT NULL,
                created_at REAL NOT NULL
            )
            """,
        ),
    ),
    Migration(
        6,
        "MCP tasks (SEP-2663): long tool calls a client polls, kept across restarts",
        (
            # One row per task handle. result_json / error_json hold the wire objects tasks/get
            # returns inline; owner_json names the process running it (host, pid, boot token), so
            # a restarted server can tell its dead predecessor's tasks from a live neighbour's.
            """
            CREATE TABLE tasks (
                id TEXT PRIMARY KEY,
                tool TEXT NOT NULL,
                arguments_json TEXT NOT NULL,
                run_id TEXT,
                status TEXT NOT NULL,
                status_message TEXT,
                input_requests_json TEXT,
                result_json TEXT,
                error_json TEXT,
                owner_json TEXT NOT NULL,
                ttl_ms INTEGER,
                poll_interval_ms INTEGER NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )
            """,
            "CREATE INDEX tasks_by_status ON tasks (status)",
        ),
    ),
)


def check_sequence(migrations: Sequence[Migration]) -> None:
    """Numbers must run 1, 2, 3, ... so 'applied up to N' is meaningful."""
    numbers = [m.number for m in migrations]
    if numbers != list(range(1, len(numbers) + 1)):
        raise StoreError(f"migration numbers must be 1..{len(numbers)} in order, got {numbers}")


async def applied_migrations(conn: aiosqlite.Connection) -> list[int]:
    async with conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ) as cur:
        if await cur.fetchone() is None:
            return []
    async with conn.execute("SELECT number FROM schema_migrations ORDER BY number") as cur:
        return [row[0] for row in await cur.fetchall()]


async def apply_migrations(
    conn: aiosqlite.Connection, migrations: Sequence[Migration] = MIGRATIONS
) -> list[int]:
    """Bring the schema up to date; returns the numbers applied now (empty if none were due).

    ``conn`` must be in autocommit mode (``isolation_level=None``). The whole upgrade is one
    ``BEGIN IMMEDIATE`` transaction, so two processes opening a fresh file at once apply each
    migration exactly once: the second waits, then finds nothing left to do.
    """
    check_sequence(migrations)
    applied: list[int] = []

    async def work() -> None:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " number INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        done = set(await applied_migrations(conn))
        newest_known = len(migrations)
        if done and max(done) > newest_known:
            raise StoreError(
                f"the database has schema version {max(done)} but this stark-mcp knows only up to "
                f"{newest_known}; upgrade stark-mcp or use another database"
            )
        for migration in migrations:
            if migration.number in done:
                continue
            for statement in migration.statements:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations (number, description, applied_at) VALUES (?, ?, ?)",
                (migration.number, migration.description, time.time()),
            )
            applied.append(migration.number)

    await run_write(conn, asyncio.Lock(), work)
    return applied
