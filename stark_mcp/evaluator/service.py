"""``Evaluator``: the evaluation service behind every caller (CLI, MCP server, orchestrator).

It resolves the device, answers from the signed result cache, shares identical in-flight
evaluations, builds candidates in sandboxed builders on a CPU pool, and hands device work to the
device's trusted worker (one warm process per device, ``workers.py``), which runs the candidate in
its own jail. See docs/evaluator.md.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stark_mcp.evaluator import assemble
from stark_mcp.evaluator.builds import BuildCache
from stark_mcp.evaluator.cache import BaselineCache, ResultCache
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.integrity import Integrity
from stark_mcp.evaluator.probe import DeviceInfo, Prober
from stark_mcp.evaluator.sandbox.cgroups import remove_own, sweep_stale
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, IsolationUnavailable, SandboxPolicy, detect
from stark_mcp.evaluator.settings import BASELINE_NAMES, EvalSettings
from stark_mcp.evaluator.static_checks import check_candidate
from stark_mcp.evaluator.stats import timing_stats
from stark_mcp.evaluator.workers import WorkerClient, WorkerCrashed, problem_frame
from stark_mcp.problems import Problem, ProblemError, source_hash
from stark_mcp.progress import Progress
from stark_mcp.records import Evaluation, Status, TimingStats

_STEPS = {"build": 1.0, "load": 2.0, "correctness": 3.0, "timing": 4.0, "baselines": 4.5}
_TOTAL = 5.0
STALE_BASELINE = 0.10  # a cached compile baseline is used only if eager now agrees with eager then


@dataclass
class _Shared:
    task: asyncio.Task[Evaluation]
    waiters: int = 0


class Evaluator:
    """Async context manager; see docs/evaluator.md for the contract."""

    def __init__(
        self,
        cache_dir: Path,
        settings: EvalSettings | None = None,
        build_workers: int | None = None,
        hidden: list[Path] | None = None,
        policy: SandboxPolicy | None = None,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self.policy = policy or SandboxPolicy()
        self.settings = settings or EvalSettings()
        self.prober = Prober(self.cache_dir)
        self.integrity = Integrity(self.cache_dir)
        self.hidden = [str(p) for p in [self.cache_dir, *(hidden or [])]]
        self._isolation: IsolationInfo | None = None
        self.builds = BuildCache(self.cache_dir / "builds", self.integrity)
        self._build_slots = asyncio.Semaphore(build_workers or max(1, (os.cpu_count() or 2) // 2))
        self._build_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._workers: dict[str, WorkerClient] = {}
        self._inflight: dict[tuple[str, ...], _Shared] = {}
        self._baseline_locks: dict[Path, asyncio.Lock] = {}
        self._tmp = Path(tempfile.mkdtemp(prefix="stark-eval-"))

    async def __aenter__(self) -> Evaluator:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        tasks = [shared.task for shared in self._inflight.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for worker in self._workers.values():
            await worker.shutdown()
        shutil.rmtree(self._tmp, ignore_errors=True)
        if self._isolation is not None and self._isolation.cgroup:
            remove_own(self._isolation.cgroup)
            sweep_stale(self._isolation.cgroup)

    # -- devices and isolation -----------------------------------------------------------------------
    async def resolve_device(self, device: str = "auto") -> str:
        """``auto`` -> cuda or cpu. The first call may start the probe process: off the event loop."""
        return await asyncio.to_thread(self.prober.resolve, device)

    async def _device(self, device: str) -> DeviceInfo:
        resolved = await asyncio.to_thread(self.prober.resolve, device)
        return await asyncio.to_thread(self.prober.info, resolved)

    async def isolation(self) -> IsolationInfo:
        if self._isolation is None:
            try:
                self._isolation = await asyncio.to_thread(detect, self.policy)
            except IsolationUnavailable as exc:
                raise EvaluatorError(str(exc)) from None
        return self._isolation

    def _worker(self, info: DeviceInfo) -> WorkerClient:
        key = f"{info.kind}:{info.name}"
        if key not in self._workers:
            self._workers[key] = WorkerClient(
                info.kind, 0 if info.kind == "cuda" else None, self.hidden, self.policy
            )
        return self._workers[key]

    # -- problems ------------------------------------------------------------------------------------
    def _problem_frame(self, problem: Problem, settings: EvalSettings) -> dict[str, Any]:
        path = self._tmp / f"problem-{problem.hash}.py"
        if not path.exists():
            path.write_text(problem.source, encoding="utf-8")
        visible = [str(p) for p in getattr(problem, "import_roots", ())]
        return problem_frame(problem.hash, problem.name, path, settings.worker_dict(), visible)

    async def _command(
        self,
        info: DeviceInfo,
        problem: Problem,
        settings: EvalSettings,
        frame: dict[str, Any],
        expect: set[str],
        timeout: float,
        progress: Any = None,
    ) -> dict[str, Any]:
        """One worker command, retried once on a fresh worker if the first one crashed."""
        worker = self._worker(info)
        for attempt in (1, 2):
            try:
                answer = await worker.command(
                    frame,
                    expect=expect | {"problem_error"},
                    timeout=timeout,
                    on_progress=progress,
                    problem=self._problem_frame(problem, settings),
                )
            except WorkerCrashed as exc:
                if attempt == 2:
                    raise EvaluatorError(
                        f"the evaluator's worker for {info.kind} failed twice: {exc}"
                    ) from None
                continue
            if answer.get("kind") == "problem_error":
                raise ProblemError(
                    f"{problem.name}: {answer.get('step')} failed: {answer.get('message')}\n"
                    + str(answer.get("traceback", ""))[-2000:]
                )
            return answer
        raise AssertionError("unreachable")

    async def check_problem(self, problem: Problem, device: str = "auto") -> None:
        """Import, build the reference, generate inputs for every shape, run it, check it fits."""
        info = await self._device(device)
        worker = self._worker(info)
        for attempt in (1, 2):
            try:
                answer = await worker.load(self._problem_frame(problem, self.settings))
            except WorkerCrashed as exc:
                if attempt == 2:
                    raise EvaluatorError(
                        f"the evaluator's worker for {info.kind} failed twice: {exc}"
                    ) from None
                continue
            if answer.get("kind") == "problem_error":
                raise ProblemError(
                    f"{problem.name}: {answer.get('step')} failed: {answer.get('message')}\n"
                    + str(answer.get("traceback", ""))[-2000:]
                )
            return

    # -- baselines -----------------------------------------------------------------------------------
    async def baselines(
        self,
        problem: Problem,
        device: str = "auto",
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, TimingStats]:
        per_shape = await self.baseline_shapes(problem, device, which, progress)
        return {n: assemble.aggregate(list(per.values())) for n, per in per_shape.items()}

    async def baseline_shapes(
        self,
        problem: Problem,
        device: str = "auto",
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, dict[str, TimingStats]]:
        """Like ``baselines``, per declared shape (name -> shape label -> stats): what it takes to
        add a baseline timed later to evaluations made before it (``assemble.with_baselines``)."""
        info = await self._device(device)
        entries = await self._baseline_entries(
            problem, info, which, self.settings, progress, time_missing=True
        )
        return _shape_stats(entries)

    async def _baseline_entries(
        self,
        problem: Problem,
        info: DeviceInfo,
        which: Any,
        settings: EvalSettings,
        progress: Progress | None,
        time_missing: bool,
        stale: set[str] = frozenset(),
    ) -> dict[str, dict[str, Any]]:  # type: ignore[assignment]
        names = list(settings.baselines if which is None else which)
        unknown = [n for n in names if n not in BASELINE_NAMES]
        if unknown:
            raise EvaluatorError(f"unknown baseline(s) {unknown}; choose from {list(BASELINE_NAMES)}")
        isolation = await self.isolation()
        cache = BaselineCache(
            self.cache_dir / "baselines", self.integrity, reuse=isolation.level != "process"
        )
        path = cache.path(problem.hash, info.name, info.torch_version, settings.timing_hash)
        if not time_missing:  # what is cached now; never wait behind a task timing the rest
            entries = cache.load(path)
            return {n: entries[n] for n in names if n in entries}
        lock = self._baseline_locks.setdefault(path, asyncio.Lock())
        async with lock:
            entries = cache.load(path)
            missing = [n for n in names if n not in entries or n in stale]
            for i, name in enumerate(missing):
                if progress is not None:
                    await progress(float(i), float(len(missing)), f"baseline {name}")
                entries[name] = await self._time_baseline(problem, info, name, settings)
                cache.store(path, entries)  # each as it is timed: a slow later one delays no earlier one
        return {n: entries[n] for n in names if n in entries}

    async def _time_baseline(
        self, problem: Problem, info: DeviceInfo, name: str, settings: EvalSettings
    ) -> dict[str, Any]:
        answer = await self._command(
            info,
            problem,
            settings,
            {"cmd": "baseline", "key": problem.hash, "name": name, "settings": settings.worker_dict()},
            {"baseline", "baseline_missing"},
            settings.baseline_timeout_s + 120,
        )
        if answer.get("kind") == "baseline_missing":
            return {"missing": str(answer.get("message", ""))[:3000]}
        try:
            shapes = [
                {
                    "label": str(s["label"]),
                    "stats": timing_stats(s["samples_ms"]).model_dump(mode="json"),
                    "eager": timing_stats(s["eager_ms"]).model_dump(mode="json"),
                }
                for s in answer["shapes"]
            ]
        except (KeyError, TypeError, ValueError) as exc:
            return {"missing": f"{name}: invalid timing answer: {exc}"}
        return {
            "shapes": shapes,
            "mode": str(answer.get("mode", name)),
            "first_calls_s": answer.get("first_calls_s"),
        }

    # -- evaluation ----------------------------------------------------------------------------------
    async def evaluate(
        self,
        problem: Problem,
        source: str,
        device: str = "auto",
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
        use_cache: bool = True,
        wait_for_baselines: bool = True,
    ) -> Evaluation:
        """``wait_for_baselines=False``: compile baselines not timed yet are neither timed nor
        waited for; the evaluation is flagged ``baseline_pending:<name>`` and not cached, and its
        caller adds them when they arrive (``RunService`` does)."""
        s = settings or self.settings
        info = await self._device(device)
        isolation = await self.isolation()
        key = (problem.hash, source_hash(source), info.name, s.settings_hash, isolation.level)
        if not wait_for_baselines:
            key = (*key, "no-wait")
        results = ResultCache(self.cache_dir / "results", self.integrity, reuse=isolation.level != "process")
        if use_cache:
            hit = await asyncio.to_thread(results.get, key)
            if hit is not None:
                return hit.model_copy(update={"cached": True})
        shared = self._inflight.get(key)
        if shared is None:
            task = asyncio.create_task(
                self._evaluate_uncached(problem, source, info, s, progress, results, key, wait_for_baselines)
            )
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

    def _forget(self, key: tuple[str, ...], shared: _Shared) -> None:
        if self._inflight.get(key) is shared:
            del self._inflight[key]

    async def _evaluate_uncached(
        self,
        problem: Problem,
        source: str,
        info: DeviceInfo,
        s: EvalSettings,
        progress: Progress | None,
        results: ResultCache,
        key: tuple[str, ...],
        wait_for_baselines: bool = True,
    ) -> Evaluation:
        started = time.monotonic()
        base = {
            "device": info.kind,
            "device_name": info.name,
            "problem_hash": problem.hash,
            "source_hash": key[1],
            "settings_hash": s.settings_hash,
        }

        async def note(message: str) -> None:
            if progress is not None:
                await progress(_STEPS.get(message, 0.0), _TOTAL, message)

        static = check_candidate(source)
        phase_seconds: dict[str, float] = {}
        if static.status is not None:
            evaluation = Evaluation(
                status=static.status, reason=static.reason, message=static.message, flags=static.flags, **base
            )
        else:
            evaluation = await self._device_evaluation(
                problem, source, info, s, note, static.needs_build, base, phase_seconds, wait_for_baselines
            )
            evaluation = evaluation.model_copy(update={"flags": static.flags + evaluation.flags})
        wall = time.monotonic() - started
        accounted = sum(evaluation.phase_seconds.values())
        phases = dict(evaluation.phase_seconds)
        phases["parent"] = round(max(0.0, wall - accounted), 3)
        evaluation = evaluation.model_copy(update={"wall_seconds": round(wall, 3), "phase_seconds": phases})
        if progress is not None:
            await progress(_TOTAL, _TOTAL, f"done: {evaluation.status.value}")
        if not any(f.startswith("baseline_pending:") for f in evaluation.flags):
            await asyncio.to_thread(results.put, key[:5], evaluation)
        return evaluation

    async def _device_evaluation(
        self,
        problem: Problem,
        source: str,
        info: DeviceInfo,
        s: EvalSettings,
        note: Callable[[str], Awaitable[None]],
        needs_build: bool,
        base: dict[str, Any],
        phase_seconds: dict[str, float],
        wait_for_baselines: bool = True,
    ) -> Evaluation:
        digest = base["source_hash"]
        isolation = await self.isolation()
        deferred = False
        build_logs: dict[str, str] = {}
        build_dir: str | None = None
        if needs_build:
            await note("build")
            t0 = time.monotonic()
            async with self._build_slots, self._build_locks[digest]:
                outcome = await self.builds.build(source, digest, info, s.build_timeout_s, isolation)
            phase_seconds["build"] = round(time.monotonic() - t0, 3)
            if not outcome.ok:
                assert outcome.status is not None
                return Evaluation(
                    status=outcome.status,
                    reason=outcome.reason,
                    message=outcome.message,
                    logs=outcome.logs,
                    phase_seconds=phase_seconds,
                    **base,
                )
            deferred, build_logs = outcome.deferred, outcome.logs
            build_dir = str(self.builds.directory(digest))
        source_path = self._tmp / f"candidate-{digest}.py"
        source_path.write_text(source, encoding="utf-8")

        async def on_progress(frame: dict[str, Any]) -> None:
            await note(str(frame.get("phase", "")))

        frame = {
            "cmd": "evaluate",
            "id": digest,
            "key": problem.hash,
            "settings": s.worker_dict(),
            "job": {
                "source_path": str(source_path),
                "build_dir": build_dir,
                "deferred": deferred,
                "build_in_place": isolation.level != "sandbox",
            },
        }
        budget = (
            s.load_timeout_s
            + s.correctness_timeout_s
            + s.timing_timeout_s
            + 300
            + (s.build_timeout_s if deferred else 0.0)
        )
        t0 = time.monotonic()
        answer = await self._command(info, problem, s, frame, {"result"}, budget, on_progress)
        result = assemble.parse(answer)
        result.phase_seconds = {**phase_seconds, **result.phase_seconds}
        result.phase_seconds["queue_and_transfer"] = round(
            max(0.0, time.monotonic() - t0 - sum(assemble.parse(answer).phase_seconds.values())), 3
        )
        if deferred:
            result.flags.append("build_deferred")
        extra: dict[str, dict[str, TimingStats]] = {}
        if result.status is Status.PASSED:
            await note("baselines")
            t1 = time.monotonic()
            extra = await self._compile_baselines(problem, info, s, result, wait_for_baselines)
            result.phase_seconds["baselines"] = round(time.monotonic() - t1, 3)
        evaluation = assemble.evaluation(result, info.kind, extra, base, source, s.min_own_kernel_share)
        flags = list(evaluation.flags)
        if evaluation.passed:
            missing = "missing" if wait_for_baselines else "pending"
            flags += [f"baseline_{missing}:{n}" for n in s.baselines if n not in evaluation.baselines]
            if evaluation.speedups.get("eager", 0.0) > s.implausible_speedup:
                flags.append("implausible_speedup")
        logs = {**build_logs, **evaluation.logs}
        return evaluation.model_copy(update={"flags": flags, "logs": logs})

    async def _compile_baselines(
        self,
        problem: Problem,
        info: DeviceInfo,
        s: EvalSettings,
        result: assemble.WorkerResult,
        wait: bool = True,
    ) -> dict[str, dict[str, TimingStats]]:
        """Cached compile baselines, re-timed when eager then and eager now disagree; with
        ``wait=False`` only those already cached and agreeing with eager now (another task may be
        timing the rest)."""
        names = [n for n in s.baselines if n != "eager"]
        if not names:
            return {}
        eager_now = {
            sh.label: timing_stats(sh.baseline_ms).median_ms for sh in result.shapes if sh.baseline_ms
        }
        entries = await self._baseline_entries(problem, info, names, s, None, time_missing=wait)
        stale = {n for n, e in entries.items() if not _agrees(e, eager_now)}
        if not wait:  # no re-timing either: the caller fills in its own figure (baseline_pending)
            return _shape_stats({n: e for n, e in entries.items() if n not in stale})
        if stale:
            entries.update(
                await self._baseline_entries(
                    problem, info, sorted(stale), s, None, time_missing=True, stale=stale
                )
            )
            for name in sorted(stale):
                if not _agrees(entries.get(name, {}), eager_now):
                    result.findings.append(
                        f"{name}: the cached and re-timed figures both disagree with eager "
                        "measured beside the candidate by more than 10%"
                    )
        return _shape_stats(entries)


def _agrees(entry: dict[str, Any], eager_now: dict[str, float]) -> bool:
    if "shapes" not in entry:
        return True  # a missing baseline has nothing to validate
    for shape in entry["shapes"]:
        now = eager_now.get(shape["label"])
        then = shape.get("eager", {}).get("median_ms")
        if now is None or not then or abs(then / now - 1.0) > STALE_BASELINE:
            return False
    return True


def _shape_stats(entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, TimingStats]]:
    out: dict[str, dict[str, TimingStats]] = {}
    for name, entry in entries.items():
        if "shapes" in entry:
            out[name] = {s["label"]: TimingStats.model_validate(s["stats"]) for s in entry["shapes"]}
    return out
