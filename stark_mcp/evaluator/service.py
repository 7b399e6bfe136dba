"""``Evaluator``: the evaluation service behind every caller (CLI, MCP server, orchestrator).

It resolves the device, answers from the result cache, shares identical in-flight evaluations,
attaches cached or freshly timed baselines, and hands the work to a ``Worker``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stark_mcp.evaluator.builds import BuildCache
from stark_mcp.evaluator.cache import BaselineCache, ResultCache
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.probe import DeviceInfo, Prober
from stark_mcp.evaluator.settings import BASELINE_NAMES, EvalSettings
from stark_mcp.evaluator.static_checks import check_candidate
from stark_mcp.evaluator.worker import LocalWorker, Worker
from stark_mcp.problems import Problem
from stark_mcp.problems import source_hash
from stark_mcp.progress import Progress
from stark_mcp.records import Evaluation, Status, TimingStats

_STEPS = {"build": 1.0, "candidate: load": 2.0, "candidate: correctness": 3.0, "candidate: timing": 4.0}
_TOTAL = 5.0


@dataclass
class _Shared:
    task: asyncio.Task[Evaluation]
    waiters: int = 0


class Evaluator:
    """Async context manager; see docs/evaluator.md for the contract."""

    def __init__(self, cache_dir: Path, settings: EvalSettings | None = None,
                 build_workers: int | None = None, worker: Worker | None = None) -> None:
        self.cache_dir = Path(cache_dir)
        self.settings = settings or EvalSettings()
        self.prober = Prober(self.cache_dir)
        self.results = ResultCache(self.cache_dir / "results")
        self.baseline_cache = BaselineCache(self.cache_dir / "baselines")
        workers = build_workers or max(1, (os.cpu_count() or 2) // 2)
        self.worker: Worker = worker or LocalWorker(BuildCache(self.cache_dir / "builds"), workers)
        self._inflight: dict[tuple[str, str, str, str], _Shared] = {}
        self._baseline_locks: dict[Path, asyncio.Lock] = {}

    async def __aenter__(self) -> Evaluator:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        tasks = [shared.task for shared in self._inflight.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- devices ---------------------------------------------------------------------------------
    async def resolve_device(self, device: str = "auto") -> str:
        """``auto`` -> cuda or cpu. The first call may start the probe process: off the event loop."""
        return await asyncio.to_thread(self.prober.resolve, device)

    async def _device(self, device: str) -> DeviceInfo:
        resolved = await asyncio.to_thread(self.prober.resolve, device)
        return await asyncio.to_thread(self.prober.info, resolved)

    # -- problems and baselines ------------------------------------------------------------------
    async def check_problem(self, problem: Problem, device: str = "auto") -> None:
        info = await self._device(device)
        await self.worker.check_problem(problem, info, self.settings)

    async def baselines(self, problem: Problem, device: str = "auto", which: list[str] | tuple[str, ...] | None = None,
                        progress: Progress | None = None) -> dict[str, TimingStats]:
        info = await self._device(device)
        entries = await self._baseline_entries(problem, info, which, self.settings, progress, time_missing=True)
        return _stats(entries)

    async def _baseline_entries(self, problem: Problem, info: DeviceInfo, which: Any, settings: EvalSettings,
                                progress: Progress | None, time_missing: bool) -> dict[str, dict[str, Any]]:
        names = list(settings.baselines if which is None else which)
        unknown = [n for n in names if n not in BASELINE_NAMES]
        if unknown:
            raise EvaluatorError(f"unknown baseline(s) {unknown}; choose from {list(BASELINE_NAMES)}")
        path = self.baseline_cache.path(problem.hash, info.name, info.torch_version, settings.timing_hash)
        lock = self._baseline_locks.setdefault(path, asyncio.Lock())
        async with lock:
            entries = self.baseline_cache.load(path)
            missing = [n for n in names if n not in entries]
            if missing and time_missing:
                async def note(message: str) -> None:
                    if progress is not None:
                        await progress(len(entries), float(len(names)), message)

                entries.update(await self.worker.time_baselines(problem, info, missing, settings, note))
                self.baseline_cache.store(path, entries)
        return {n: entries[n] for n in names if n in entries}

    # -- evaluation ------------------------------------------------------------------------------
    async def evaluate(self, problem: Problem, source: str, device: str = "auto",
                       settings: EvalSettings | None = None, progress: Progress | None = None,
                       use_cache: bool = True) -> Evaluation:
        s = settings or self.settings
        info = await self._device(device)
        key = (problem.hash, source_hash(source), info.name, s.settings_hash)
        if use_cache:
            hit = self.results.get(key)
            if hit is not None:
                return hit.model_copy(update={"cached": True})
        shared = self._inflight.get(key)
        if shared is None:
            task = asyncio.create_task(self._evaluate_uncached(problem, source, info, s, progress, key))
            shared = self._inflight[key] = _Shared(task)
            task.add_done_callback(lambda _t, k=key, sh=shared: self._forget(k, sh))
        shared.waiters += 1
        try:
            return await asyncio.shield(shared.task)
        except asyncio.CancelledError:
            if shared.waiters == 1 and not shared.task.done():
                shared.task.cancel()  # the last caller left: kill the evaluation's processes
                await asyncio.wait([shared.task])
            raise
        finally:
            shared.waiters -= 1

    def _forget(self, key: tuple[str, str, str, str], shared: _Shared) -> None:
        if self._inflight.get(key) is shared:
            del self._inflight[key]

    async def _evaluate_uncached(self, problem: Problem, source: str, info: DeviceInfo, s: EvalSettings,
                                 progress: Progress | None, key: tuple[str, str, str, str]) -> Evaluation:
        base = {"device": info.kind, "device_name": info.name, "problem_hash": problem.hash,
                "source_hash": key[1], "settings_hash": s.settings_hash}

        async def note(message: str) -> None:
            if progress is not None:
                await progress(_STEPS.get(message, 0.0), _TOTAL, message)

        static = check_candidate(source)
        if static.status is not None:
            evaluation = Evaluation(status=static.status, reason=static.reason, message=static.message,
                                    flags=static.flags, **base)
        else:
            evaluation = await self.worker.evaluate(problem, source, info, s, note, static.needs_build)
            evaluation = evaluation.model_copy(update={**base, "flags": static.flags + evaluation.flags})
            evaluation = await self._attach_baselines(problem, info, s, evaluation, note)
        if progress is not None:
            await progress(_TOTAL, _TOTAL, f"done: {evaluation.status.value}")
        self.results.put(key, evaluation)
        return evaluation

    async def _attach_baselines(self, problem: Problem, info: DeviceInfo, s: EvalSettings,
                                evaluation: Evaluation, note: Any) -> Evaluation:
        """Passed candidates get every chosen baseline (timed if needed); others get what is cached."""
        passed = evaluation.status is Status.PASSED
        entries = await self._baseline_entries(problem, info, None, s, None, time_missing=passed)
        stats = _stats(entries)
        flags = list(evaluation.flags)
        if passed:
            flags += [f"baseline_missing:{n}" for n in s.baselines if n not in stats]
        speedups: dict[str, float] = {}
        if passed and evaluation.runtime is not None and evaluation.runtime.median_ms > 0:
            speedups = {n: b.median_ms / evaluation.runtime.median_ms for n, b in stats.items()}
            if speedups.get("eager", 0.0) > s.implausible_speedup:
                flags.append("implausible_speedup")
        return evaluation.model_copy(update={"baselines": stats, "speedups": speedups, "flags": flags})


def _stats(entries: dict[str, dict[str, Any]]) -> dict[str, TimingStats]:
    return {n: TimingStats.model_validate(e["stats"]) for n, e in entries.items() if "stats" in e}
