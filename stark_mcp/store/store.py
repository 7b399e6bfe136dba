"""The durable store: runs, nodes, stand-alone evaluations and LLM exchanges in one SQLite file.

Every write is its own short ``BEGIN IMMEDIATE`` transaction committed before the
method returns, so a crash loses at most the call in flight, and another process
sharing the file waits milliseconds, not the length of an attempt.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite
from pydantic import ValidationError

from stark_mcp.problems import Problem
from stark_mcp.records import (
    Action,
    Evaluation,
    ExchangeRecord,
    KernelLanguage,
    Node,
    ProfileReport,
    RunOwner,
    RunRecord,
    RunStatus,
    Status,
    StoredEvaluation,
    TimingStats,
    Usage,
    default_language,
)
from stark_mcp.store import codec, ids
from stark_mcp.store.connection import connect, run_write
from stark_mcp.store.errors import NotFound, StoreError
from stark_mcp.store.migrations import apply_migrations
from stark_mcp.store.stats import RunStats

# Ids are random, so a clash is rare; retrying a few times makes it vanishingly so.
_ID_ATTEMPTS = 16


class Store:
    """One connection to the database; open with ``await Store.open(path)``.

    Safe to share between coroutines: one lock orders every use of the connection, so a
    read never sees another coroutine's write before it commits. Other processes share
    the file through SQLite's own locking.
    """

    def __init__(self, conn: aiosqlite.Connection, path: Path, rng: random.Random) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._rng = rng
        self._closed = False
        self.path = path

    @classmethod
    async def open(cls, path: Path | str, *, id_rng: random.Random | None = None) -> Store:
        """Create the file and its folders if needed, bring the schema up to date, and connect.

        ``id_rng`` draws run and evaluation ids; tests pass a seeded one to force clashes.
        """
        resolved = Path(path).expanduser()
        conn = await connect(resolved)
        try:
            await apply_migrations(conn)
        except sqlite3.DatabaseError as exc:
            await conn.close()
            raise StoreError(f"cannot use database {resolved}: {exc}") from None
        except BaseException:
            await conn.close()
            raise
        return cls(conn, resolved, id_rng or random.SystemRandom())

    async def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        if not self._closed:
            self._closed = True
            async with self._lock:
                await self._conn.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ---- runs -------------------------------------------------------------------------------

    async def create_run(
        self,
        *,
        problem: Problem,
        device: str,
        strategy: str = "stark",
        policy: dict[str, Any],
        budget: int,
        seed: int,
        name: str | None = None,
        config: dict[str, Any] | None = None,
        baselines: dict[str, TimingStats] | None = None,
        root_evaluation: Evaluation | None = None,
        language: KernelLanguage | None = None,
        pending_baselines: Sequence[str] = (),
    ) -> RunRecord:
        """Record a run; with ``root_evaluation`` its root node (the reference, ``n0``) is
        inserted in the same transaction, so no crash can leave a run without a root.
        ``language`` defaults to C++ on the CPU and CUDA elsewhere."""
        now = time.time()
        run = RunRecord(
            id=ids.new_run_id(self._rng), name=name or problem.name, problem=problem, device=device,
            strategy=strategy, policy=policy, budget=budget, seed=seed, config=config or {},
            baselines=baselines or {}, language=language or default_language(device),
            pending_baselines=list(pending_baselines), created_at=now, updated_at=now,
        )

        async def work() -> RunRecord:
            chosen = run
            for _ in range(_ID_ATTEMPTS):
                if not await self._exists("SELECT 1 FROM runs WHERE id = ?", (chosen.id,)):
                    break
                chosen = chosen.model_copy(update={"id": ids.new_run_id(self._rng)})
            else:
                raise StoreError(f"could not draw an unused run id in {_ID_ATTEMPTS} tries")
            await self._insert("runs", codec.run_columns(chosen))
            if root_evaluation is not None:
                root = Node(
                    id=ids.node_id(0), run_id=chosen.id, parent_id=None, seq=0, action=Action.ROOT,
                    source=problem.source, evaluation=root_evaluation, created_at=now,
                )
                await self._insert("nodes", codec.node_columns(root))
            return chosen

        return await run_write(self._conn, self._lock, work)

    async def get_run(self, run_id: str) -> RunRecord:
        async with self._lock:
            return await self._fetch_run(run_id)

    async def list_runs(self) -> list[RunRecord]:
        """Newest first."""
        async with self._lock:
            rows = await self._all("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC", ())
        return [codec.run_from_row(row) for row in rows]

    async def update_run(
        self,
        run_id: str,
        *,
        status: RunStatus | None = None,
        baselines: dict[str, TimingStats] | None = None,
        config: dict[str, Any] | None = None,
        pending_baselines: Sequence[str] | None = None,
        budget: int | None = None,
    ) -> RunRecord:
        """Set the given fields (``config`` replaces the whole dict) and bump ``updated_at``."""

        async def work() -> RunRecord:
            current = await self._fetch_run(run_id)
            changes: dict[str, Any] = {"updated_at": max(time.time(), current.updated_at)}
            if status is not None:
                changes["status"] = status
            if baselines is not None:
                changes["baselines"] = baselines
            if config is not None:
                changes["config"] = config
            if pending_baselines is not None:
                changes["pending_baselines"] = list(pending_baselines)
            if budget is not None:
                changes["budget"] = budget
            # Re-validate so a bad status is refused here, not stored and found later.
            try:
                updated = RunRecord.model_validate({**current.model_dump(), **changes})
            except ValidationError as exc:
                raise StoreError(f"invalid update of run {run_id!r}: {exc}") from None
            await self._conn.execute(
                "UPDATE runs SET status = :status, baselines_json = :baselines_json,"
                " config_json = :config_json, pending_baselines_json = :pending_baselines_json,"
                " budget = :budget, updated_at = :updated_at WHERE id = :id",
                codec.run_columns(updated),
            )
            return updated

        return await run_write(self._conn, self._lock, work)

    # ---- who drives a running run ------------------------------------------------------------

    async def claim_run(self, run_id: str, owner: RunOwner) -> None:
        """Record ``owner`` as the one driving the run now (the last claimant wins)."""

        async def work() -> None:
            await self._require_run(run_id)
            await self._conn.execute(
                "INSERT INTO run_owners (run_id, pid, started, host, session, claimed_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET pid = excluded.pid,"
                " started = excluded.started, host = excluded.host, session = excluded.session,"
                " claimed_at = excluded.claimed_at",
                (run_id, owner.pid, owner.started, owner.host, owner.session, time.time()),
            )

        await run_write(self._conn, self._lock, work)

    async def running_owners(self) -> list[tuple[str, RunOwner | None]]:
        """Every run whose status is 'running', with its owner (None for a run claimed by nobody)."""
        async with self._lock:
            rows = await self._all(
                "SELECT runs.id AS run_id, o.pid, o.started, o.host, o.session FROM runs"
                " LEFT JOIN run_owners AS o ON o.run_id = runs.id WHERE runs.status = 'running'", ()
            )
        return [
            (row["run_id"], None if row["pid"] is None else RunOwner(
                pid=row["pid"], started=row["started"], host=row["host"], session=row["session"]))
            for row in rows
        ]

    async def interrupt_owned(self, run_id: str, owner: RunOwner | None) -> bool:
        """Mark the run 'interrupted' if it is still 'running' and still ``owner``'s (None: claimed by
        nobody), in one statement, so a run another process claimed meanwhile is left alone."""

        async def work() -> bool:
            if owner is None:
                condition, args = "NOT EXISTS (SELECT 1 FROM run_owners WHERE run_id = :id)", {}
            else:
                condition = (
                    "EXISTS (SELECT 1 FROM run_owners WHERE run_id = :id AND pid = :pid"
                    " AND started = :started AND host = :host AND session = :session)"
                )
                args = {"pid": owner.pid, "started": owner.started, "host": owner.host,
                        "session": owner.session}
            cursor = await self._conn.execute(
                "UPDATE runs SET status = 'interrupted', updated_at = MAX(updated_at, :now)"
                f" WHERE id = :id AND status = 'running' AND {condition}",
                {"id": run_id, "now": time.time(), **args},
            )
            return cursor.rowcount > 0

        return await run_write(self._conn, self._lock, work)

    async def run_stats(self, run_id: str) -> RunStats:
        async with self._lock:
            await self._require_run(run_id)
            counts = await self._one(
                "SELECT COUNT(*) AS attempts, COALESCE(SUM(status = ?), 0) AS passed"
                " FROM nodes WHERE run_id = ? AND action != 'root'",
                (Status.PASSED.value, run_id),
            )
            best = await self._one(
                "SELECT id, score FROM nodes WHERE run_id = ? AND action != 'root' AND status = ?"
                " ORDER BY score, seq LIMIT 1",
                (run_id, Status.PASSED.value),
            )
        assert counts is not None  # an aggregate always yields one row
        return RunStats(
            run_id=run_id,
            attempts=counts["attempts"],
            passed=counts["passed"],
            best_node_id=best["id"] if best is not None else None,
            best_score=codec.score_from_column(best["score"] if best is not None else None),
        )

    # ---- nodes ------------------------------------------------------------------------------

    async def add_node(
        self,
        run_id: str,
        *,
        parent_id: str | None,
        action: Action,
        source: str,
        plan: str | None = None,
        evaluation: Evaluation | None = None,
        usage: Usage | None = None,
        adherence: float | None = None,
    ) -> Node:
        """Record one attempt and commit it; the id is ``n<seq>``, the root always ``n0``.

        The root has no parent and a run has one; every other node's parent must exist in
        the same run. The seq is read and used inside one write transaction, so concurrent
        writers (coroutines or processes) get distinct, contiguous seqs.
        """
        action = Action(action)
        if (action is Action.ROOT) != (parent_id is None):
            raise StoreError(
                "the root node has no parent" if action is Action.ROOT
                else f"a {action.value} node needs a parent"
            )

        async def work() -> Node:
            await self._require_run(run_id)
            if action is Action.ROOT:
                if await self._exists("SELECT 1 FROM nodes WHERE run_id = ? AND action = 'root'", (run_id,)):
                    raise StoreError(f"run {run_id!r} already has a root node")
            elif not await self._node_exists(run_id, parent_id):
                raise NotFound(f"no node {parent_id!r} in run {run_id!r}")
            row = await self._one("SELECT COALESCE(MAX(seq), -1) + 1 FROM nodes WHERE run_id = ?", (run_id,))
            assert row is not None  # an aggregate always yields one row
            seq = row[0]
            node = Node(
                id=ids.node_id(seq), run_id=run_id, parent_id=parent_id, seq=seq, action=action, plan=plan,
                source=source, evaluation=evaluation, usage=usage or Usage(), adherence=adherence,
                created_at=time.time(),
            )
            await self._insert("nodes", codec.node_columns(node))
            return node

        return await run_write(self._conn, self._lock, work)

    async def add_profile(self, run_id: str, node_id: str, profile: ProfileReport) -> int:
        """Keep a profile taken after a node was recorded (``profile_kernel``). Nodes are never
        changed once written: profiles go in their own append-only table, and readers lay the
        newest one over the node's evaluation (``ProfileReport.supersedes``). Returns its seq."""

        async def work() -> int:
            row = await self._one(
                "SELECT evaluation_json IS NOT NULL FROM nodes WHERE run_id = ? AND id = ?", (run_id, node_id)
            )
            if row is None:
                await self._require_run(run_id)
                raise NotFound(f"no node {node_id!r} in run {run_id!r}")
            if not row[0]:
                raise StoreError(f"node {node_id!r} of run {run_id!r} has no evaluation to hold a profile")
            cur = await self._conn.execute(
                "INSERT INTO profiles (run_id, node_id, profile_json, created_at) VALUES (?, ?, ?, ?)",
                (run_id, node_id, profile.model_dump_json(), time.time()),
            )
            assert cur.lastrowid is not None
            return int(cur.lastrowid)

        return await run_write(self._conn, self._lock, work)

    async def profiles(self, run_id: str, *, after_seq: int = 0) -> list[tuple[int, str, ProfileReport]]:
        """Profiles kept with ``add_profile``, oldest first, as (seq, node id, report); only those
        with a seq above ``after_seq`` when given (one indexed query, like ``nodes``)."""
        async with self._lock:
            rows = await self._all(
                "SELECT seq, node_id, profile_json FROM profiles WHERE run_id = ? AND seq > ? ORDER BY seq",
                (run_id, after_seq),
            )
        return [(int(r[0]), str(r[1]), ProfileReport.model_validate_json(r[2])) for r in rows]

    async def get_node(self, run_id: str, node_id: str) -> Node:
        async with self._lock:
            row = await self._one("SELECT * FROM nodes WHERE run_id = ? AND id = ?", (run_id, node_id))
            if row is None:
                await self._require_run(run_id)
                raise NotFound(f"no node {node_id!r} in run {run_id!r}")
        return codec.node_from_row(row)

    async def nodes(self, run_id: str, *, after_seq: int = -1) -> list[Node]:
        """The run's nodes in creation order; only those with a seq above ``after_seq`` when given.

        Nodes change after they are written only when late baselines fill in their speedups
        (``fill_baselines``, which bumps the run's revision): a reader holding the first ``k``
        keeps them current with ``nodes_since`` (one indexed query).
        """
        async with self._lock:
            await self._require_run(run_id)
            rows = await self._all(
                "SELECT * FROM nodes WHERE run_id = ? AND seq > ? ORDER BY seq", (run_id, after_seq)
            )
        return [codec.node_from_row(row) for row in rows]

    async def nodes_since(self, run_id: str, after_seq: int, revision: int) -> tuple[int, list[Node]]:
        """``(revision, nodes)`` for a reader holding the nodes up to ``after_seq`` read at
        ``revision``: the newer nodes when the run's revision is unchanged, else every node
        (``fill_baselines`` rewrote some). Same cost as ``nodes``: the run check reads the revision."""
        async with self._lock:
            row = await self._one("SELECT revision FROM runs WHERE id = ?", (run_id,))
            if row is None:
                raise NotFound(f"no run {run_id!r}")
            current = int(row[0])
            rows = await self._all(
                "SELECT * FROM nodes WHERE run_id = ? AND seq > ? ORDER BY seq",
                (run_id, after_seq if current == revision else -1),
            )
        return current, [codec.node_from_row(row) for row in rows]

    async def fill_baselines(
        self,
        run_id: str,
        baselines: dict[str, TimingStats],
        fill: Callable[[Evaluation], Evaluation | None],
        *,
        done: Sequence[str],
        errors: dict[str, str] | None = None,
        root_evaluation: Evaluation | None = None,
    ) -> RunRecord:
        """Late baselines arrive: in one transaction, add them to the run, take ``done`` off its
        pending list, rewrite each node and stored evaluation that ``fill`` changes (it returns
        None to leave one alone) and bump the run's revision. ``errors`` (baseline name -> why it
        could not be timed) go to ``config["baseline_errors"]``. Scores are runtimes, which a
        baseline does not change, so the score column stays as it is."""

        async def work() -> RunRecord:
            current = await self._fetch_run(run_id)
            config = dict(current.config)
            if errors:
                config["baseline_errors"] = {**config.get("baseline_errors", {}), **errors}
            updated = current.model_copy(update={
                "config": config,
                "baselines": {**current.baselines, **baselines},
                "pending_baselines": [n for n in current.pending_baselines if n not in set(done)],
                "updated_at": max(time.time(), current.updated_at),
            })
            await self._conn.execute(
                "UPDATE runs SET baselines_json = :baselines_json, pending_baselines_json ="
                " :pending_baselines_json, config_json = :config_json, updated_at = :updated_at,"
                " revision = revision + 1 WHERE id = :id",
                {k: v for k, v in codec.run_columns(updated).items()
                 if k in ("id", "baselines_json", "pending_baselines_json", "config_json", "updated_at")},
            )
            for table, key in (("nodes", "id"), ("evaluations", "id")):
                rows = await self._all(
                    f"SELECT {key}, action, evaluation_json FROM {table} WHERE run_id = ?"
                    if table == "nodes"
                    else f"SELECT {key}, NULL AS action, evaluation_json FROM {table} WHERE run_id = ?",
                    (run_id,),
                )
                for row in rows:
                    if not row["evaluation_json"]:
                        continue
                    if row["action"] == Action.ROOT.value and root_evaluation is not None:
                        changed: Evaluation | None = root_evaluation
                    else:
                        changed = fill(Evaluation.model_validate_json(row["evaluation_json"]))
                    if changed is not None:
                        await self._conn.execute(
                            f"UPDATE {table} SET evaluation_json = ? WHERE run_id = ? AND {key} = ?",
                            (changed.model_dump_json(), run_id, row[key]),
                        )
            return updated

        return await run_write(self._conn, self._lock, work)

    async def count_nodes(self, run_id: str, *, exclude_root: bool = True) -> int:
        """Attempts made so far (what the budget counts), or all nodes with ``exclude_root=False``."""
        where = " AND action != 'root'" if exclude_root else ""
        async with self._lock:
            await self._require_run(run_id)
            row = await self._one(f"SELECT COUNT(*) FROM nodes WHERE run_id = ?{where}", (run_id,))
        assert row is not None  # an aggregate always yields one row
        return int(row[0])

    # ---- stand-alone evaluations ------------------------------------------------------------

    async def save_evaluation(
        self, run_id: str, source_hash: str, evaluation: Evaluation
    ) -> StoredEvaluation:
        stored = StoredEvaluation(
            id=ids.new_evaluation_id(self._rng), run_id=run_id, source_hash=source_hash,
            evaluation=evaluation, created_at=time.time(),
        )

        async def work() -> StoredEvaluation:
            chosen = stored
            await self._require_run(run_id)
            for _ in range(_ID_ATTEMPTS):
                if not await self._exists("SELECT 1 FROM evaluations WHERE id = ?", (chosen.id,)):
                    break
                chosen = chosen.model_copy(update={"id": ids.new_evaluation_id(self._rng)})
            else:
                raise StoreError(f"could not draw an unused evaluation id in {_ID_ATTEMPTS} tries")
            await self._insert("evaluations", {
                "id": chosen.id, "run_id": run_id, "source_hash": source_hash,
                "evaluation_json": evaluation.model_dump_json(), "created_at": chosen.created_at,
            })
            return chosen

        return await run_write(self._conn, self._lock, work)

    async def get_evaluation(self, evaluation_id: str) -> StoredEvaluation:
        async with self._lock:
            row = await self._one("SELECT * FROM evaluations WHERE id = ?", (evaluation_id,))
        if row is None:
            raise NotFound(f"no evaluation {evaluation_id!r}")
        return codec.evaluation_from_row(row)

    # ---- LLM exchanges ----------------------------------------------------------------------

    async def log_exchange(
        self,
        *,
        run_id: str,
        node_id: str | None,
        role: str,
        model: str,
        request: dict[str, Any],
        reply: str,
        usage: Usage,
        error: str | None = None,
    ) -> ExchangeRecord:
        """Keep one LLM call; ``node_id`` may be None and set later with ``attach_exchanges``."""
        created_at = time.time()
        request_json = codec.to_json(request, "exchange request")

        async def work() -> int | None:
            await self._require_node(run_id, node_id)
            cursor = await self._conn.execute(
                "INSERT INTO exchanges (run_id, node_id, role, model, request_json, reply, usage_json,"
                " error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id, node_id, role, model, request_json, reply, usage.model_dump_json(), error,
                    created_at,
                ),
            )
            await cursor.close()
            return cursor.lastrowid

        exchange_id = await run_write(self._conn, self._lock, work)
        assert exchange_id is not None  # set by every successful INSERT
        return ExchangeRecord(
            id=exchange_id, run_id=run_id, node_id=node_id, role=role, model=model,
            request=json.loads(request_json), reply=reply, usage=usage, error=error, created_at=created_at,
        )

    async def attach_exchanges(self, run_id: str, exchange_ids: Sequence[int], node_id: str) -> None:
        """Link exchanges logged before their node existed to that node, all or none.

        Attaching again to the same node is a no-op; moving an exchange to another node is
        refused, since it would rewrite which attempt a prompt produced.
        """
        wanted = sorted(set(exchange_ids))
        if not wanted:
            return

        async def work() -> None:
            await self._require_node(run_id, node_id)
            marks = ", ".join("?" for _ in wanted)
            rows = await self._all(
                f"SELECT id, node_id FROM exchanges WHERE run_id = ? AND id IN ({marks})", (run_id, *wanted)
            )
            missing = sorted(set(wanted) - {row["id"] for row in rows})
            if missing:
                raise NotFound(f"no exchange {missing[0]} in run {run_id!r}")
            for row in rows:
                if row["node_id"] not in (None, node_id):
                    raise StoreError(f"exchange {row['id']} already belongs to node {row['node_id']!r}")
            await self._conn.execute(
                f"UPDATE exchanges SET node_id = ? WHERE run_id = ? AND id IN ({marks})",
                (node_id, run_id, *wanted),
            )

        await run_write(self._conn, self._lock, work)

    async def exchanges(self, run_id: str, node_id: str | None = None) -> list[ExchangeRecord]:
        """The run's exchanges in the order they were logged; only one node's when ``node_id`` is given."""
        async with self._lock:
            await self._require_node(run_id, node_id)
            if node_id is None:
                rows = await self._all("SELECT * FROM exchanges WHERE run_id = ? ORDER BY id", (run_id,))
            else:
                rows = await self._all(
                    "SELECT * FROM exchanges WHERE run_id = ? AND node_id = ? ORDER BY id", (run_id, node_id)
                )
        return [codec.exchange_from_row(row) for row in rows]

    # ---- helpers: callers hold the lock ------------------------------------------------------

    async def _fetch_run(self, run_id: str) -> RunRecord:
        row = await self._one("SELECT * FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise NotFound(f"no run {run_id!r}")
        return codec.run_from_row(row)

    async def _require_run(self, run_id: str) -> None:
        if not await self._exists("SELECT 1 FROM runs WHERE id = ?", (run_id,)):
            raise NotFound(f"no run {run_id!r}")

    async def _require_node(self, run_id: str, node_id: str | None) -> None:
        """NotFound unless the run exists and, when a node is named, the node is in it."""
        if node_id is None:
            await self._require_run(run_id)
        elif not await self._node_exists(run_id, node_id):
            await self._require_run(run_id)
            raise NotFound(f"no node {node_id!r} in run {run_id!r}")

    async def _node_exists(self, run_id: str, node_id: str | None) -> bool:
        return await self._exists("SELECT 1 FROM nodes WHERE run_id = ? AND id = ?", (run_id, node_id))

    # ---- memory across runs (entries are JSON documents of stark_mcp.memory.MemoryEntry) ----------

    async def save_memory(self, run_id: str, problem_hash: str, entry_json: str, created_at: float) -> None:
        """Keep (or replace) the entry of ``run_id``."""

        async def work() -> None:
            await self._conn.execute(
                "INSERT OR REPLACE INTO memory (run_id, problem_hash, entry_json, created_at) "
                "VALUES (?, ?, ?, ?)", (run_id, problem_hash, entry_json, created_at),
            )

        await run_write(self._conn, self._lock, work)

    async def memory_entries(self) -> list[str]:
        """Every entry's JSON, oldest first."""
        async with self._lock:
            rows = await self._all("SELECT entry_json FROM memory ORDER BY created_at, run_id", ())
        return [row[0] for row in rows]

    async def clear_memory(self) -> int:
        """Forget every entry; returns how many there were."""

        async def work() -> int:
            cursor = await self._conn.execute("DELETE FROM memory")
            return cursor.rowcount

        return await run_write(self._conn, self._lock, work)

    async def _one(self, sql: str, params: Iterable[Any]) -> sqlite3.Row | None:
        async with self._conn.execute(sql, tuple(params)) as cur:
            return await cur.fetchone()

    async def _all(self, sql: str, params: Iterable[Any]) -> list[sqlite3.Row]:
        async with self._conn.execute(sql, tuple(params)) as cur:
            return list(await cur.fetchall())

    async def _exists(self, sql: str, params: Iterable[Any]) -> bool:
        return await self._one(sql, params) is not None

    async def _insert(self, table: str, columns: dict[str, Any]) -> None:
        names = ", ".join(columns)
        marks = ", ".join(f":{name}" for name in columns)
        await self._conn.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", columns)
