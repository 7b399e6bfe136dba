from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from stark_mcp.store import MIGRATIONS, Migration, Store, StoreError, apply_migrations

pytestmark = pytest.mark.anyio

LATEST = len(MIGRATIONS)
EXTRA = Migration(
    LATEST + 1, "a later schema change", ("CREATE TABLE tags (run_id TEXT NOT NULL, tag TEXT NOT NULL)",)
)


def recorded(path: Path) -> list[tuple[int, float]]:
    with sqlite3.connect(path) as raw:
        return raw.execute("SELECT number, applied_at FROM schema_migrations ORDER BY number").fetchall()


async def test_open_creates_folders_and_records_migrations_once(db_path: Path) -> None:
    assert not db_path.parent.exists()
    async with await Store.open(db_path):
        pass
    first = recorded(db_path)
    assert [n for n, _ in first] == [m.number for m in MIGRATIONS]
    async with await Store.open(db_path):
        pass
    assert recorded(db_path) == first  # reopening applied nothing again


async def test_apply_is_idempotent_and_applies_only_what_is_new(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        assert await apply_migrations(conn, MIGRATIONS) == list(range(1, LATEST + 1))
        assert await apply_migrations(conn, MIGRATIONS) == []
        assert await apply_migrations(conn, (*MIGRATIONS, EXTRA)) == [LATEST + 1]
        assert await apply_migrations(conn, (*MIGRATIONS, EXTRA)) == []
    with sqlite3.connect(path) as raw:
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "nodes", "evaluations", "exchanges", "profiles", "tags", "schema_migrations"} <= tables
    assert [n for n, _ in recorded(path)] == list(range(1, LATEST + 2))


async def test_a_failing_migration_leaves_the_previous_schema(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    broken = Migration(LATEST + 1, "half good", ("CREATE TABLE half (x)", "CREATE TABLE runs (x)"))
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await apply_migrations(conn, MIGRATIONS)
        with pytest.raises(sqlite3.OperationalError, match="already exists"):
            await apply_migrations(conn, (*MIGRATIONS, broken))
        assert not conn.in_transaction
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchall() == []
    assert [n for n, _ in recorded(path)] == list(range(1, LATEST + 1))


async def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await apply_migrations(conn, (*MIGRATIONS, EXTRA))
    with pytest.raises(
        StoreError, match=f"schema version {LATEST + 1} but this stark-mcp knows only up to {LATEST}"
    ):
        await Store.open(path)


async def test_migration_numbers_must_be_contiguous(tmp_path: Path) -> None:
    async with aiosqlite.connect(tmp_path / "m.db", isolation_level=None) as conn:
        with pytest.raises(StoreError, match="migration numbers"):
            await apply_migrations(conn, (*MIGRATIONS, Migration(LATEST + 2, "skips one", ("SELECT 1",))))


async def test_connection_settings(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        conn = store._conn
        values = {}
        for pragma in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys"):
            async with conn.execute(f"PRAGMA {pragma}") as cur:
                values[pragma] = (await cur.fetchone())[0]
    assert values == {"journal_mode": "wal", "synchronous": 2, "busy_timeout": 5000, "foreign_keys": 1}


async def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database" * 100)
    with pytest.raises(StoreError, match="notes.db"):
        await Store.open(path)


async def test_a_database_of_the_first_schema_gains_the_profiles_table(tmp_path: Path) -> None:
    # A database written before profiles existed (migration 1 only) is upgraded when it is opened:
    # its rows stay, and a profile can then be kept beside one of its nodes.
    from stark_mcp.problems import problem_from_source
    from stark_mcp.records import Action, Evaluation, ProfileReport, Status

    path = tmp_path / "old.db"
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        assert await apply_migrations(conn, MIGRATIONS[:1]) == [1]
    source = "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs(): return []\n"
    source += "def get_init_inputs(): return []\n"
    async with await Store.open(path) as store:
        run = await store.create_run(
            problem=problem_from_source(source, name="p"),
            device="cpu",
            policy={},
            budget=1,
            seed=1,
            root_evaluation=Evaluation(status=Status.PASSED),
        )
        await store.add_profile(run.id, "n0", ProfileReport(source="none", reason="profiling needs a GPU"))
    assert [n for n, _ in recorded(path)] == list(range(1, LATEST + 1))
    async with await Store.open(path) as store:
        assert [p.reason for _, _, p in await store.profiles(run.id)] == ["profiling needs a GPU"]
        assert (await store.get_node(run.id, "n0")).action is Action.ROOT


async def test_migration_3_gives_old_runs_a_language_and_no_pending_baselines(tmp_path: Path) -> None:
    """A database of schema 1 with a CPU and a GPU run opens with languages cpp and cuda."""
    path = tmp_path / "v1.db"
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await apply_migrations(conn, MIGRATIONS[:1])
        for run_id, device in (("r-cpu", "cpu"), ("r-gpu", "cuda")):
            await conn.execute(
                "INSERT INTO runs VALUES"
                " (?, 'n', ?, 'h', ?, 'stark', '{}', 3, 1, '{}', '{}', 'created', 1, 1)",
                (run_id, '{"name": "p", "source": "class Model: pass", "origin": "t"}', device),
            )
    async with await Store.open(path) as store:
        runs = {run.id: run for run in await store.list_runs()}
        assert runs["r-cpu"].language == "cpp" and runs["r-gpu"].language == "cuda"
        assert runs["r-cpu"].pending_baselines == [] and runs["r-gpu"].pending_baselines == []
        revision, nodes = await store.nodes_since("r-cpu", -1, 0)
        assert (revision, nodes) == (0, [])
    assert [n for n, _ in recorded(path)] == list(range(1, LATEST + 1))
