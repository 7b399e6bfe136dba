"""Run a benchmark: every (problem, strategy) pair as one run of the headless loop, resumably.

Each pair's run carries ``{"bench": {"id", "pair", "wall_s"}}`` in its config, so the database
says which pairs exist: a rerun of the same command skips complete pairs and continues the
others where their runs stopped (``run_search`` resumes a run from what it holds). After each
pair, its row in ``results.jsonl`` and its ``runs/RUN_ID.json.gz`` are rewritten, so an
interruption loses at most the attempts in flight. Pairs start in the plan's order, as many side by
side as there are evaluation workers (``pairs_at_once``): one pair's baselines and last attempt
would otherwise leave the other workers idle. A scripted backend answers each pair from the replies
tied to it; with replies tied to no pair, pairs run one at a time, so those are consumed in order.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field

from stark_mcp.bench.errors import BenchError
from stark_mcp.bench.files import (
    Manifest,
    open_manifest,
    read_results,
    run_document_path,
    write_json_gz,
    write_results,
)
from stark_mcp.bench.metrics import geomean, row_speedup
from stark_mcp.bench.plan import BenchPlan, Pair
from stark_mcp.bench.progress import BenchEvent, BenchEventKind, BenchProgress
from stark_mcp.bench.rows import ResultRow, result_row
from stark_mcp.errors import StarkError
from stark_mcp.llm import LLMBackend, ScriptedBackend
from stark_mcp.orchestrator.documents import RunDocument, load_run_document
from stark_mcp.orchestrator.events import SearchEvent
from stark_mcp.orchestrator.limits import Limits
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.strategies import get_strategy
from stark_mcp.records import RunRecord


class PairFailure(BaseModel):
    pair: str
    message: str


class BenchOutcome(BaseModel):
    bench_id: str
    out: Path
    pairs: int
    complete: int = Field(description="pairs whose run holds its whole budget")
    ran: int = Field(description="pairs this session worked on")
    skipped: int = Field(description="pairs already complete before this session")
    failed: list[PairFailure] = Field(
        default_factory=list, description="pairs whose run could not start or could not go on"
    )
    stopped: str | None = Field(None, description="why the benchmark stopped early, if it did")


async def bench_runs(service: RunService, bench_id: str) -> dict[str, RunRecord]:
    """The benchmark's runs by pair id; of two runs for one pair (two processes raced), the first."""
    found: dict[str, RunRecord] = {}
    for run in sorted(await service.store.list_runs(), key=lambda r: (r.created_at, r.id)):
        bench = run.config.get("bench")
        if isinstance(bench, dict) and bench.get("id") == bench_id:
            found.setdefault(str(bench.get("pair")), run)
    return found


async def run_bench(
    service: RunService,
    plan: BenchPlan,
    backend: LLMBackend,
    *,
    limits: Limits | None = None,
    progress: BenchProgress | None = None,
) -> BenchOutcome:
    """Run (or resume) every pair of ``plan``; outputs go to ``plan.spec.out``."""
    out = plan.spec.out
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out):
        manifest = open_manifest(out, plan)
        bench = _Bench(service, plan, manifest, backend, limits or Limits(), progress)
        return await bench.run()


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One benchmark process per folder: two would create duplicate runs for the same pairs."""
    fd = os.open(out / "bench.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BenchError(f"another stark-mcp bench is running in {out}; wait for it or stop it") from None
        yield
    finally:
        os.close(fd)


class _Bench:
    def __init__(
        self,
        service: RunService,
        plan: BenchPlan,
        manifest: Manifest,
        backend: LLMBackend,
        limits: Limits,
        progress: BenchProgress | None,
    ) -> None:
        self.service = service
        self.plan = plan
        self.manifest = manifest
        self.backend = backend
        self.limits = limits
        self.progress = progress
        self.out = plan.spec.out
        self.rows: dict[str, ResultRow] = {}
        self.started = time.monotonic()
        self.session_attempts = 0  # attempts made by this session's finished pairs
        self.live: dict[str, SearchEvent] = {}  # each running pair's latest search event

    async def run(self) -> BenchOutcome:
        runs = await bench_runs(self.service, self.manifest.bench_id)
        lost = [
            r.run_id
            for r in read_results(self.out)
            if runs.get(r.pair) is None or runs[r.pair].id != r.run_id
        ]
        if lost:
            # Another database (STARK_HOME) than the benchmark's: going on would start its pairs afresh.
            raise BenchError(
                f"{self.out} has results of runs that are not in the database {self.service.store.path} "
                f"({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''}); resume with the STARK_HOME "
                "(or STARK_DB_PATH) the benchmark was started with"
            )
        for pair in self.plan.pairs:
            if pair.id in runs:
                self.rows[pair.id] = await self._record(pair, runs[pair.id].id, wall_s=0.0)
        self._write_results()
        await self._emit("started", None, message=f"benchmark {self.manifest.bench_id} in {self.out}")
        skipped = ran = 0
        failed: dict[int, PairFailure] = {}
        stopped: str | None = None
        todo: list[tuple[int, Pair]] = []
        for index, pair in enumerate(self.plan.pairs, start=1):
            row = self.rows.get(pair.id)
            if row is not None and row.complete:
                skipped += 1
                await self._emit("pair_skipped", (index, pair))
            else:
                todo.append((index, pair))
        # A semaphore wakes its waiters first come, first served: pairs start in the plan's order.
        gate = asyncio.Semaphore(await self._pairs_at_once() if todo else 1)

        async def one(index: int, pair: Pair) -> None:
            nonlocal ran, stopped
            async with gate:
                if stopped is not None:
                    return
                ran += 1
                try:
                    stop = await self._run_pair((index, pair), runs.get(pair.id))
                except _PairFailed as exc:
                    failed[index] = PairFailure(pair=pair.id, message=str(exc))
                    await self._emit("pair_failed", (index, pair), message=str(exc))
                    return
                if stop == "llm_error" and stopped is None:
                    stopped = (
                        "the model backend cannot be used; fix it and rerun the same command to continue"
                    )
                    await self._emit("stopped", (index, pair), message=stopped)

        try:
            async with asyncio.TaskGroup() as group:
                for index, pair in todo:
                    group.create_task(one(index, pair))
        except BaseExceptionGroup as errors:
            # The others were stopped and kept what they recorded; callers see the error itself.
            raise errors.exceptions[0] from None
        if stopped is None:
            await self._emit("finished", None, message="all pairs visited")
        return BenchOutcome(
            bench_id=self.manifest.bench_id,
            out=self.out,
            pairs=len(self.plan.pairs),
            complete=sum(r.complete for r in self.rows.values()),
            ran=ran,
            skipped=skipped,
            failed=[failed[i] for i in sorted(failed)],
            stopped=stopped,
        )

    async def _pairs_at_once(self) -> int:
        if self.plan.spec.pairs_at_once:
            return self.plan.spec.pairs_at_once
        if isinstance(self.backend, ScriptedBackend) and self.backend.unscoped:
            return 1  # replies tied to no pair go to whoever asks first: keep the file's order
        return max(1, await self.service.evaluation_slots(self.plan.spec.device))

    def _backend(self, pair: Pair) -> LLMBackend:
        if isinstance(self.backend, ScriptedBackend):
            return self.backend.for_pair(pair.id)
        return self.backend

    # ---- one pair ------------------------------------------------------------------------

    async def _run_pair(self, at: tuple[int, Pair], run: RunRecord | None) -> str | None:
        """Create or resume the pair's run and search until its budget or a limit; the stop reason."""
        spec = self.plan.spec
        _, pair = at
        started = time.monotonic()

        async def on_phase(done: float, total: float | None, message: str) -> None:
            await self._emit("phase", at, message=message)

        async def on_search(event: SearchEvent) -> None:
            self.live[pair.id] = event
            await self._emit("search", at, search=event)

        if run is None:
            await self._emit("pair_started", at, message="timing baselines and creating the run")
            strategy = get_strategy(pair.strategy)
            config = {"bench": {"id": self.manifest.bench_id, "pair": pair.id, "wall_s": 0.0}}
            try:
                run, _root = await self.service.create_run(
                    pair.problem,
                    device=spec.device,
                    policy=strategy.policy,
                    budget=spec.budget,
                    seed=pair.seed,
                    strategy=pair.strategy,
                    eval_settings=spec.eval_settings,
                    config=config,
                    progress=on_phase,
                    language=spec.language,
                )
            except StarkError as exc:
                raise _PairFailed(f"could not start: {exc}") from exc
        else:
            await self._emit("pair_started", at, message=f"resuming run {run.id}")
        before = await self.service.store.count_nodes(run.id)
        try:
            summary = await run_search(
                self.service,
                run.id,
                self._backend(pair),
                # 0: one expansion in flight per evaluation worker, so every GPU has work
                parallel=spec.parallel or await self.service.evaluation_slots(run.device),
                limits=self.limits,
                progress=on_search,
            )
        except StarkError as exc:
            # This pair's search cannot go on (e.g. nothing left to expand); the others can.
            await self._finish_pair(pair, run.id, started, before)
            raise _PairFailed(f"run {run.id} stopped: {exc}") from exc
        except BaseException:
            # Interrupted, or a bug: keep what the run recorded before passing the error on.
            await self._finish_pair(pair, run.id, started, before)
            raise
        await self._finish_pair(pair, run.id, started, before)
        await self._emit("pair_done", at, message=f"run {run.id}: {summary.stop_reason}")
        return summary.stop_reason

    async def _finish_pair(self, pair: Pair, run_id: str, started: float, before: int) -> None:
        after = await self.service.store.count_nodes(run_id)
        self.rows[pair.id] = await self._record(pair, run_id, wall_s=time.monotonic() - started)
        # Counted once the row holds the attempts, so no event sees them twice or not at all.
        self.session_attempts += after - before
        self.live.pop(pair.id, None)
        self._write_results()

    async def _record(self, pair: Pair, run_id: str, *, wall_s: float) -> ResultRow:
        """Add ``wall_s`` to the run's bench time, write its document if it changed, return its row."""
        run = await self.service.get_run(run_id)
        bench = dict(run.config.get("bench") or {})
        if wall_s:
            bench["wall_s"] = float(bench.get("wall_s") or 0.0) + wall_s
            run = await self.service.store.update_run(run_id, config={**run.config, "bench": bench})
        document = await load_run_document(self.service, run_id)
        path = run_document_path(self.out, run_id)
        # Every search ends by bumping the run's updated_at, so an older file misses attempts.
        if wall_s or not path.exists() or path.stat().st_mtime < run.updated_at:
            write_json_gz(path, document.model_dump(mode="json"))
        return _row(self.manifest.bench_id, pair, document, float(bench.get("wall_s") or 0.0))

    def _write_results(self) -> None:
        write_results(self.out, [self.rows[p.id] for p in self.plan.pairs if p.id in self.rows])

    # ---- progress ------------------------------------------------------------------------

    async def _emit(
        self,
        kind: BenchEventKind,
        at: tuple[int, Pair] | None,
        *,
        search: SearchEvent | None = None,
        message: str = "",
    ) -> None:
        """One event about the pair ``at`` (index, pair), or the benchmark; its totals count every
        pair: a running one by its latest search event, the others by their rows."""
        if self.progress is None:
            return
        index, pair = at if at is not None else (0, None)
        done = cost = 0.0
        session = self.session_attempts
        for p in self.plan.pairs:
            row, live = self.rows.get(p.id), self.live.get(p.id)
            if live is not None:
                done, cost = done + live.attempt, cost + live.cost_usd
                session += live.attempt - (len(row.attempts) if row is not None else 0)
            elif row is not None:
                done, cost = done + min(len(row.attempts), row.budget), cost + row.usage.cost_usd
        await self.progress(
            BenchEvent(
                kind=kind,
                pair=pair.id if pair else None,
                index=index,
                pairs=len(self.plan.pairs),
                pairs_done=sum(r.complete for r in self.rows.values()),
                attempts_done=int(done),
                attempts_total=len(self.plan.pairs) * self.plan.spec.budget,
                session_attempts=session,
                elapsed_s=time.monotonic() - self.started,
                cost_usd=cost,
                best=self._best(),
                search=search,
                message=message,
            )
        )

    def _best(self) -> dict[str, float]:
        best: dict[str, float] = {}
        for strategy in self.plan.strategies:
            values = [
                s for r in self.rows.values() if r.strategy == strategy and (s := row_speedup(r, "eager"))
            ]
            if values:
                best[strategy] = geomean(values) or 1.0
        return best


class _PairFailed(Exception):
    pass


def _row(bench_id: str, pair: Pair, document: RunDocument, wall_s: float) -> ResultRow:
    return result_row(
        bench_id=bench_id,
        pair=pair.id,
        key=pair.key,
        run=document.run,
        nodes=document.nodes,
        exchanges=document.exchanges,
        wall_s=wall_s,
    )
