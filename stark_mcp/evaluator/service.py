"""``Evaluator``: the evaluation service behind every caller (CLI, MCP server, orchestrator).

It resolves the device, answers from the signed result cache, shares identical in-flight
evaluations, builds candidates in sandboxed builders on a CPU pool, and hands device work to a free
trusted worker of the device's pool (one warm process per chosen GPU, ``workers.py``, leased whole
by ``pool.py``), which runs the candidate in its own jail. See docs/evaluator.md and docs/scale.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stark_mcp.config import default_toolchain_dir
from stark_mcp.evaluator import assemble, profiles
from stark_mcp.evaluator.builds import BuildCache, builder_cpus
from stark_mcp.evaluator.cache import BaselineCache, ResultCache
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.dependencies import changes, dependencies, reevaluated_message, stack_tag
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.extensions import ExtensionCache
from stark_mcp.evaluator.gpus import GpuChoice, choose_gpus, parse_gpus, visible_physical
from stark_mcp.evaluator.integrity import Integrity
from stark_mcp.evaluator.pool import Slot, SlotPool
from stark_mcp.evaluator.prepare import warmup_requests
from stark_mcp.evaluator.priority import in_background
from stark_mcp.evaluator.probe import DeviceInfo, Prober
from stark_mcp.evaluator.sandbox.cgroups import remove_own, sweep_stale
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.forked import process_zygote
from stark_mcp.evaluator.sandbox.launch import unreadable_root
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, IsolationUnavailable, SandboxPolicy, detect
from stark_mcp.evaluator.sanitizer_report import first_report, is_memory_error
from stark_mcp.evaluator.settings import BASELINE_NAMES, EvalSettings
from stark_mcp.evaluator.sol_floor import SolFloors
from stark_mcp.evaluator.static_checks import check_candidate
from stark_mcp.evaluator.stats import timing_stats
from stark_mcp.evaluator.workers import WorkerClient, WorkerCrashed, problem_frame
from stark_mcp.problems import Problem, ProblemError, source_hash
from stark_mcp.problems.user_files import digest_bytes, user_files
from stark_mcp.progress import Progress
from stark_mcp.records import Dependencies, Evaluation, ProfileReport, Status, TimingStats, TrustReport
from stark_mcp.sol.model import SolReport

_STEPS = {
    "build": 1.0,
    "load": 2.0,
    "correctness": 3.0,
    "timing": 4.0,
    "baselines": 4.5,
    "profile": 4.8,
    "sanitizer": 4.8,
}
_TOTAL = 5.0
STALE_BASELINE = 0.10  # a cached compile baseline is used only if eager now agrees with eager then
WARM_LABEL = "start"  # a worker's start and first load ahead of its evaluation (``_warm_worker``)


@dataclass
class _Shared:
    task: asyncio.Task[Evaluation]
    waiters: int = 0


@dataclass
class _Staged:
    """A candidate ready for a worker: its job frame, or the build's verdict when it failed."""

    job: dict[str, Any]
    deferred: bool = False
    logs: dict[str, str] = field(default_factory=dict)
    failure: Evaluation | None = None
    extensions: list[dict[str, Any]] = field(default_factory=list)


class Evaluator:
    """Async context manager; see docs/evaluator.md for the contract."""

    def __init__(
        self,
        cache_dir: Path,
        settings: EvalSettings | None = None,
        build_workers: int | None = None,
        hidden: list[Path] | None = None,
        policy: SandboxPolicy | None = None,
        tool_paths: ToolPaths | None = None,
        gpus: str | Sequence[int] | None = None,
        cpu_workers: int = 1,
        toolchain_dir: Path | None = None,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        # Only trusted code writes it, so caches may share one: each then makes its headers once.
        self.toolchain_dir = Path(toolchain_dir) if toolchain_dir else default_toolchain_dir(self.cache_dir)
        self.gpus = parse_gpus(gpus)  # None: every visible GPU
        self.cpu_workers = max(1, cpu_workers)
        self._gpu_choice: GpuChoice | None = None
        self.policy = policy or SandboxPolicy()
        self.tool_paths = tool_paths or ToolPaths()  # Nsight Compute and compute-sanitizer, for profiles
        self.settings = settings or EvalSettings()
        self.prober = Prober(self.cache_dir)
        self.integrity = Integrity(self.cache_dir)
        self.hidden = [str(p) for p in [self.cache_dir, self.toolchain_dir, *(hidden or [])]]
        self._isolation: IsolationInfo | None = None
        self.extensions = ExtensionCache(
            self.cache_dir / "extensions", self.toolchain_dir, self.integrity, fork=self.policy.fork
        )
        self.builds = BuildCache(
            self.cache_dir / "builds",
            self.integrity,
            self.extensions,
            hidden=self.hidden,
            fork=self.policy.fork,
        )
        self._build_slots = asyncio.Semaphore(build_workers or max(1, (os.cpu_count() or 2) // 2))
        self._build_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._pools: dict[str, SlotPool[WorkerClient]] = {}
        self._inflight: dict[tuple[str, ...], _Shared] = {}
        self._baseline_locks: dict[Path, asyncio.Lock] = {}
        # (problem key, device) checked by a worker of this evaluator: evaluations load the problem
        # themselves, so checking it again need not queue behind a worker busy with other work.
        self._checked: set[tuple[str, str]] = set()
        self._warming: set[asyncio.Task[None]] = set()  # workers loading a problem while a build runs
        self._zygote_start: asyncio.Future[Any] | None = None  # this process's zygote, started early
        self._tmp_dir: Path | None = None  # made on first use: an evaluator never entered leaves none
        self.sol = SolFloors(self.cache_dir / "sol", self.integrity)  # floors and peaks: docs/sol.md

    async def __aenter__(self) -> Evaluator:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        tasks = [shared.task for shared in self._inflight.values()] + list(self._warming)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._zygote_start is not None:  # a thread: it cannot be cancelled, only awaited
            await asyncio.gather(self._zygote_start, return_exceptions=True)
        for pool in self._pools.values():
            await asyncio.gather(*(slot.handle.shutdown() for slot in pool.slots))
        await self.builds.close()
        await self.extensions.close()
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None
        if self._isolation is not None and self._isolation.cgroup:
            remove_own(self._isolation.cgroup)
            sweep_stale(self._isolation.cgroup)

    async def settle(self, waiting: Callable[[int], None] | None = None) -> None:
        if waiting is not None and self.extensions.pending:
            waiting(self.extensions.pending)
        await self.extensions.settle()

    async def prepare(self, device: str = "auto") -> list[str]:
        """Make now what a first extension build on this machine would make inside an agent's attempt
        (the shared precompiled header, include profiles: ``prepare.py``), and wait for it; notes
        say what was made (none: it was made before)."""
        info = await self._device(device)
        env = scrub_env(os.environ, {k: v for k, v in self.builds.env(info, "").items() if v})
        toolchain = await self.extensions.toolchain(env)
        cpus = builder_cpus(info)
        notes: list[str] = []
        for label, request in warmup_requests(info.kind):
            made = await self.extensions.prime(request, env, toolchain, self.settings.build_timeout_s, cpus)
            notes += [f"{label}: {note}" for note in made]
        await self.extensions.settle()
        return notes

    # -- devices and isolation -----------------------------------------------------------------------
    async def resolve_device(self, device: str = "auto") -> str:
        """``auto`` -> cuda or cpu. The first call may start the probe process: off the event loop."""
        return await asyncio.to_thread(self.prober.resolve, device)

    async def _device(self, device: str) -> DeviceInfo:
        resolved = await asyncio.to_thread(self.prober.resolve, device)
        if resolved != "cuda":
            return await asyncio.to_thread(self.prober.info, resolved)
        if self._gpu_choice is None:
            gpus = await asyncio.to_thread(self.prober.gpus)
            self._gpu_choice = choose_gpus(self.gpus, gpus, visible_physical(os.environ, len(gpus)))
        return self._gpu_choice.model

    async def device_info(self, device: str = "auto") -> DeviceInfo:
        """What evaluations on ``device`` run on (one model per process: mixed GPUs are refused)."""
        return await self._device(device)

    async def device_name(self, device: str = "auto") -> str:
        """The model evaluations on ``device`` are timed on (one per process: mixed GPUs are refused)."""
        return (await self._device(device)).name

    async def slots(self, device: str = "auto") -> int:
        """How many evaluations on ``device`` can run at once: the pool's live workers."""
        return len(self.pool(await self._device(device)).live)

    async def worker_pool(self, device: str = "auto") -> SlotPool[WorkerClient]:
        """The device's pool of trusted workers (its ``history`` records every lease)."""
        return self.pool(await self._device(device))

    async def isolation(self) -> IsolationInfo:
        if self._isolation is None:
            try:
                self._isolation = await asyncio.to_thread(detect, self.policy)
            except IsolationUnavailable as exc:
                raise EvaluatorError(str(exc)) from None
        return self._isolation

    def pool(self, info: DeviceInfo) -> SlotPool[WorkerClient]:
        key = f"{info.kind}:{info.name}"
        if key not in self._pools:
            if info.kind == "cuda":
                assert self._gpu_choice is not None  # _device chose the GPUs before any pool is asked for
                slots = [
                    Slot(
                        f"cuda:{index}",
                        WorkerClient("cuda", physical, self.hidden, self.policy, self.tool_paths),
                    )
                    for index, physical in zip(
                        self._gpu_choice.indices, self._gpu_choice.physical, strict=True
                    )
                ]
            else:
                slots = [
                    Slot(f"cpu:{n}", WorkerClient(info.kind, None, self.hidden, self.policy, self.tool_paths))
                    for n in range(self.cpu_workers)
                ]

            async def retire(slot: Slot[WorkerClient]) -> None:
                await slot.handle.shutdown()

            self._pools[key] = SlotPool(
                slots,
                what=f"evaluator's worker for {info.kind}",
                on_retire=retire,
                fault_types=(WorkerCrashed,),
            )
        return self._pools[key]

    @property
    def _tmp(self) -> Path:
        """Where the problem and candidate files the worker reads are written."""
        if self._tmp_dir is None:
            self._tmp_dir = Path(tempfile.mkdtemp(prefix="stark-eval-"))
        return self._tmp_dir

    # -- problems ------------------------------------------------------------------------------------
    def _problem_frame(self, problem: Problem, settings: EvalSettings) -> dict[str, Any]:
        path = self._tmp / f"problem-{problem.hash}.py"
        if not path.exists():
            path.write_text(problem.source, encoding="utf-8")
        visible = [str(p) for p in getattr(problem, "import_roots", ())]
        return problem_frame(loaded_key(problem), problem.name, path, settings.worker_dict(), visible)

    async def _command(
        self,
        info: DeviceInfo,
        problem: Problem,
        settings: EvalSettings,
        frame: dict[str, Any],
        expect: set[str],
        timeout: float,
        progress: Any = None,
        timings: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """One worker command on a free worker of the pool, retried on another if its worker crashed."""

        loading = self._problem_frame(problem, settings)
        if frame.get("key") == problem.hash:  # the problem as loaded with the user's files as they are now
            frame = {**frame, "key": loading["key"]}

        async def job(worker: WorkerClient) -> dict[str, Any]:
            return await worker.command(
                frame,
                expect=expect | {"problem_error"},
                timeout=timeout,
                on_progress=progress,
                problem=loading,
                timings=timings,
            )

        def waited(what: str, seconds: float) -> None:
            if timings is not None:  # a named phase of its own, never ``transfer``
                # a worker starting and loading the problem ahead of its evaluation (``_warm_worker``)
                # is that evaluation's process start, however far it got before the command came
                name = "process_start" if what == WARM_LABEL else f"waiting:{what}"
                timings[name] = round(timings.get(name, 0.0) + seconds, 3)

        answer = await self.pool(info).run(
            job, label=_job_label(frame), background=in_background(), waited=waited
        )
        if answer.get("kind") == "problem_error":
            raise ProblemError(
                f"{problem.name}: {answer.get('step')} failed: {answer.get('message')}\n"
                + str(answer.get("traceback", ""))[-2000:]
            )
        return answer

    def _start_zygote(self) -> None:
        """Start this process's zygote (it imports torch: 1.5-5 s) in a thread now, while this
        evaluation probes the device, checks the source and stages it, rather than after all that
        when its first worker or builder asks for it (``process_zygote`` is shared and locked)."""
        if self.policy.fork and self._zygote_start is None:
            env = scrub_env(os.environ, {})
            self._zygote_start = asyncio.ensure_future(asyncio.to_thread(process_zygote, env))

    def _warm_worker(
        self, info: DeviceInfo, problem: Problem, settings: EvalSettings, queue: bool = False
    ) -> None:
        """Start a worker and load the problem as soon as an evaluation knows it needs one (no cached
        verdict), before its dependencies, static checks, staging and any build: the worker's
        start-up (forked once the zygote has imported torch; a CUDA context, the reference, the
        problem's runners: seconds) then overlaps them rather than following them. Only on a free
        worker, unless ``queue`` (a build: long enough to wait for one). What is left of it when
        the evaluation's command comes is its ``process_start``; a failure is the evaluation's own
        to report (its command starts or loads again and says why)."""
        pool = self.pool(info)
        frame = self._problem_frame(problem, settings)
        key = str(frame["key"])
        free = [slot for slot in pool.live if not slot.busy]
        if any(slot.handle.loaded.get(key) for slot in free) or not (free or queue):
            return  # a free worker has it loaded already, or none is free to start on it now
        if any(task.get_name() == f"warm-{key}" for task in self._warming):
            return  # one is starting for it already: a second would only queue behind it

        async def warm() -> None:
            with contextlib.suppress(Exception):
                await pool.run(lambda worker: worker.load(frame), label=WARM_LABEL)

        task = asyncio.create_task(warm(), name=f"warm-{key}")
        self._warming.add(task)
        task.add_done_callback(self._warming.discard)

    async def check_problem(self, problem: Problem, device: str = "auto") -> None:
        """Import, build the reference, generate inputs for every shape, run it, check it fits."""
        await self._check_import_roots(problem)
        info = await self._device(device)
        frame = self._problem_frame(problem, self.settings)
        checked = (str(frame["key"]), info.name)
        if checked in self._checked:
            return
        answer = await self.pool(info).run(lambda worker: worker.load(frame))
        if answer.get("kind") == "problem_error":
            raise ProblemError(
                f"{problem.name}: {answer.get('step')} failed: {answer.get('message')}\n"
                + str(answer.get("traceback", ""))[-2000:]
            )
        self._checked.add(checked)

    async def _check_import_roots(self, problem: Problem) -> None:
        """The trusted worker runs as us; candidates and baselines may run as a uid of their own,
        which must be able to import the user's code: refuse now, with the folder to fix."""
        roots = getattr(problem, "import_roots", ())
        if not roots:
            return
        info = await self.isolation()
        if not (info.root and info.level in ("sandbox", "uid")):
            return
        for root in roots:
            blocked = await asyncio.to_thread(unreadable_root, root, info.level, self.hidden)
            if blocked is not None:
                raise ProblemError(
                    f"{problem.name}: candidates run as a user of their own (isolation {info.level}), who "
                    f"cannot read {blocked} on the way to the import root {root}; make it readable "
                    f"(chmod o+rx {blocked}) or move the project"
                )

    async def _dependencies(
        self, problem: Problem, info: DeviceInfo, settings: EvalSettings, source: str | None = None
    ) -> Dependencies:
        """What a verdict on ``problem`` (and ``source``) depends on here (``dependencies.py``)."""
        isolation = await self.isolation()
        texts = [problem.source] if source is None else [problem.source, source]
        return await asyncio.to_thread(
            dependencies, info, isolation.level, settings, getattr(problem, "import_roots", ()), texts
        )

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
        deps = await self._dependencies(problem, info, settings)
        path = cache.path(problem.hash, info.name, info.torch_version, settings.timing_hash, stack_tag(deps))
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
        self._start_zygote()
        asked = time.monotonic()
        info = await self._device(device)
        if not use_cache:
            self._warm_worker(info, problem, s)
        isolation = await self.isolation()
        deps = await self._dependencies(problem, info, s, source)
        # a fresh cache probes the device and the sandbox (a process that initialises CUDA: seconds)
        probe_s = time.monotonic() - asked
        key = (problem.hash, source_hash(source), info.name, s.settings_hash, isolation.level, deps.digest)
        if not wait_for_baselines:
            key = (*key, "no-wait")
        results = ResultCache(self.cache_dir / "results", self.integrity, reuse=isolation.level != "process")
        reevaluated = None
        if use_cache:
            # stored under the first six parts (only a result with every baseline is stored): it
            # answers a caller that would not wait for baselines as well
            hit = await asyncio.to_thread(results.get, key[:6])
            if hit is None:  # a result for the same texts made under other dependencies says what changed
                self._warm_worker(info, problem, s)
                before = await asyncio.to_thread(results.previous, key[:6])
                what = changes(before.dependencies, deps) if before is not None else []
                reevaluated = reevaluated_message(what) if what else None
            if hit is not None:
                if s.profile and hit.passed and hit.device == "cuda" and hit.profile is None:
                    # Cached before profiles existed, or with profiling off: the verdict stands, the
                    # profile is added and kept with it.
                    profile = await self.profile(problem, source, device=info.kind, settings=s)
                    hit = hit.model_copy(update={"profile": profile})
                    await asyncio.to_thread(results.put, key[:6], hit)
                return hit.model_copy(update={"cached": True})
        shared = self._inflight.get(key)
        if shared is None:
            task = asyncio.create_task(
                self._evaluate_uncached(
                    problem, source, info, s, progress, results, key, deps, wait_for_baselines, probe_s
                )
            )
            shared = self._inflight[key] = _Shared(task)
            task.add_done_callback(lambda _t, k=key, sh=shared: self._forget(k, sh))
        shared.waiters += 1
        try:
            evaluation = await asyncio.shield(shared.task)
            return evaluation.model_copy(update={"reevaluated": reevaluated}) if reevaluated else evaluation
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
        deps: Dependencies,
        wait_for_baselines: bool = True,
        probe_s: float = 0.0,
    ) -> Evaluation:
        started = time.monotonic() - probe_s
        base = {
            "device": info.kind,
            "device_name": info.name,
            "problem_hash": problem.hash,
            "source_hash": key[1],
            "settings_hash": s.settings_hash,
            "dependencies": deps,
        }

        async def note(message: str) -> None:
            if progress is not None:
                await progress(_STEPS.get(message, 0.0), _TOTAL, message)

        static = check_candidate(source)
        phase_seconds = {"probe": round(probe_s, 3), "static": round(time.monotonic() - started - probe_s, 3)}
        if static.status is not None:
            evaluation = Evaluation(
                status=static.status, reason=static.reason, message=static.message, flags=static.flags,
                phase_seconds=phase_seconds, **base,
            )
        else:
            evaluation = await self._device_evaluation(
                problem, source, info, s, note, static.needs_build, base, phase_seconds, wait_for_baselines
            )
            evaluation = evaluation.model_copy(update={"flags": static.flags + evaluation.flags})
        wall = time.monotonic() - started
        accounted = sum(evaluation.phase_seconds.values())
        phases = dict(evaluation.phase_seconds)
        # what no phase measured (the scheduling between them): kept small, and
        # tests/evaluator/test_phases.py holds it under 5% of the wall time
        phases["other"] = round(max(0.0, wall - accounted), 3)
        evaluation = evaluation.model_copy(update={"wall_seconds": round(wall, 3), "phase_seconds": phases})
        if progress is not None:
            await progress(_TOTAL, _TOTAL, done_message(evaluation))
        if not any(f.startswith("baseline_pending:") for f in evaluation.flags):
            await asyncio.to_thread(results.put, key[:6], evaluation)
        return evaluation

    async def _stage(
        self,
        source: str,
        digest: str,
        info: DeviceInfo,
        s: EvalSettings,
        needs_build: bool,
        note: Callable[[str], Awaitable[None]],
        phase_seconds: dict[str, float],
    ) -> _Staged:
        """Build the candidate if it needs it and write its file: what a worker's job frame names."""
        started = time.monotonic()
        isolation = await self.isolation()
        staged = _Staged(job={})
        build_dir: str | None = None
        if needs_build:
            await note("build")
            t0 = time.monotonic()
            async with self._build_slots, self._build_locks[digest]:
                t1 = time.monotonic()
                outcome = await self.builds.build(source, digest, info, s.build_timeout_s, isolation)
            phase_seconds["queue"] = round(t1 - t0, 3)
            phase_seconds["build"] = round(time.monotonic() - t1, 3)
            staged.extensions = outcome.extensions
            if not outcome.ok:
                assert outcome.status is not None
                staged.failure = Evaluation(
                    status=outcome.status,
                    reason=outcome.reason,
                    message=outcome.message,
                    logs=outcome.logs,
                    phase_seconds=phase_seconds,
                    extensions=outcome.extensions,
                    # A verdict reached at build time still says what walled the candidate off.
                    trust=TrustReport(
                        isolation=isolation.level,
                        isolation_note=isolation.note,
                        defences=[f"candidate's import and builds in their own jails ({isolation.level})"],
                    ),
                )
                return staged
            staged.deferred, staged.logs = outcome.deferred, outcome.logs
            build_dir = str(self.builds.directory(digest))
        source_path = self._tmp / f"candidate-{digest}.py"
        source_path.write_text(source, encoding="utf-8")
        staged.job = {
            "source_path": str(source_path),
            "build_dir": build_dir,
            "deferred": staged.deferred,
            "build_in_place": isolation.level != "sandbox",
        }
        # Measured, not left to ``other``: each file call gives up the interpreter, and in a server
        # whose threads are busy, getting it back took 50 ms a call (tests/evaluator/test_phases.py).
        built = phase_seconds.get("queue", 0.0) + phase_seconds.get("build", 0.0)
        phase_seconds["stage"] = round(max(0.0, time.monotonic() - started - built), 3)
        return staged

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
        if needs_build and not await asyncio.to_thread(self.builds.verified, digest):
            self._warm_worker(info, problem, s, queue=True)  # a real build: the worker starts under it
        staged = await self._stage(source, digest, info, s, needs_build, note, phase_seconds)
        if staged.failure is not None:
            return staged.failure.model_copy(update=base)
        deferred, build_logs = staged.deferred, staged.logs

        async def on_progress(frame: dict[str, Any]) -> None:
            await note(str(frame.get("phase", "")))

        frame = {
            "cmd": "evaluate",
            "id": digest,
            "key": problem.hash,
            "settings": s.worker_dict(),
            "job": staged.job,
        }
        budget = (
            s.load_timeout_s
            + s.correctness_timeout_s
            + s.timing_timeout_s
            + 300
            + (s.build_timeout_s if deferred else 0.0)
        )
        t0 = time.monotonic()
        timings: dict[str, float] = {}
        answer = await self._command(info, problem, s, frame, {"result"}, budget, on_progress, timings)
        result = assemble.parse(answer)
        device_phases = dict(result.phase_seconds)
        # the worker's own start-up of this evaluation (a spare runner, the files it needs)
        worker_setup = device_phases.pop("worker_setup", 0.0)
        inside = sum(device_phases.values()) + worker_setup
        result.phase_seconds = _add(phase_seconds, device_phases)
        result.phase_seconds["queue"] = round(
            result.phase_seconds.get("queue", 0.0) + timings.get("queue", 0), 3
        )
        result.phase_seconds["process_start"] = round(timings.get("process_start", 0.0) + worker_setup, 3)
        for name, seconds in timings.items():
            if name.startswith("waiting:"):  # for a device slot, named by the work that held it
                result.phase_seconds[name] = seconds
        result.phase_seconds["transfer"] = round(
            max(0.0, time.monotonic() - t0 - inside - sum(timings.values())), 3
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
        if evaluation.passed:  # the floor check may reject an impossible time (docs/sol.md)
            evaluation = await self._sol_judge(problem, info, s, evaluation)
        flags = list(evaluation.flags)
        if evaluation.passed:
            missing = "missing" if wait_for_baselines else "pending"
            flags += [f"baseline_{missing}:{n}" for n in s.baselines if n not in evaluation.baselines]
            if evaluation.speedups.get("eager", 0.0) > s.implausible_speedup:
                flags.append("implausible_speedup")
        logs = {**build_logs, **evaluation.logs}
        update: dict[str, Any] = {"flags": flags, "logs": logs, "extensions": staged.extensions}
        if info.kind == "cuda":
            after = await self._after_verdict(problem, source, info, s, note, staged.job, result, evaluation)
            if "logs" in after:
                after["logs"] = {**logs, **after["logs"]}
            update.update(after)
        return evaluation.model_copy(update=update)

    async def _sol_judge(
        self, problem: Problem, info: DeviceInfo, s: EvalSettings, evaluation: Evaluation
    ) -> Evaluation:
        """The SOL record and floor check; an evaluation without a floor is left as it is."""

        async def ask(frame: dict[str, Any], expect: set[str], timeout: float) -> dict[str, Any]:
            return await self._command(info, problem, s, frame, expect, timeout)

        t0 = time.monotonic()
        try:
            deps = evaluation.dependencies or await self._dependencies(problem, info, s)
            judged = await self.sol.judge(problem, info, evaluation, ask, stack_tag(deps))
        except (WorkerCrashed, ProblemError, EvaluatorError) as exc:
            logs = {**evaluation.logs, "sol": f"no floor: {exc}"[:1500]}
            judged = evaluation.model_copy(update={"logs": logs})
        phases = {**judged.phase_seconds, "sol": round(time.monotonic() - t0, 3)}
        return judged.model_copy(update={"phase_seconds": phases})

    async def sol_of(
        self, problem: Problem, evaluation: Evaluation, device: str = "auto"
    ) -> SolReport | None:
        """The SOL record of a time measured outside ``evaluate`` (the run's root: the reference
        timed as the eager baseline), or None; never a verdict."""
        info = await self._device(device)

        async def ask(frame: dict[str, Any], expect: set[str], timeout: float) -> dict[str, Any]:
            return await self._command(info, problem, self.settings, frame, expect, timeout)

        deps = await self._dependencies(problem, info, self.settings)
        return (await self.sol.judge(problem, info, evaluation, ask, stack_tag(deps))).sol

    # -- after the verdict: profile and sanitizer (GPU; never change the verdict or a time) ------------
    async def _after_verdict(
        self,
        problem: Problem,
        source: str,
        info: DeviceInfo,
        s: EvalSettings,
        note: Callable[[str], Awaitable[None]],
        job: dict[str, Any],
        result: assemble.WorkerResult,
        evaluation: Evaluation,
    ) -> dict[str, Any]:
        phases = dict(evaluation.phase_seconds)
        if evaluation.passed and s.profile:
            await note("profile")
            t0 = time.monotonic()
            label = result.shapes[0].label if result.shapes else ""
            listed = result.launches or result.kernels
            report = await self._profile_job(problem, source, info, s, job, listed, label)
            phases["profile"] = round(time.monotonic() - t0, 3)
            return {"profile": report, "phase_seconds": phases}
        text = evaluation.message + "\n" + evaluation.logs.get("candidate", "")
        failed = evaluation.status in (Status.RUNTIME_ERROR, Status.LOAD_ERROR)
        failed_on_memory = failed and is_memory_error(text)
        if s.sanitize and failed_on_memory:
            await note("sanitizer")
            t0 = time.monotonic()
            found = await self._sanitize_job(problem, info, s, job)
            phases["sanitizer"] = round(time.monotonic() - t0, 3)
            return {"phase_seconds": phases, "logs": {"compute-sanitizer": found}}
        return {}

    async def _profile_job(
        self,
        problem: Problem,
        source: str | None,
        info: DeviceInfo,
        s: EvalSettings,
        job: dict[str, Any] | None,
        listed: list[Any] | None = None,
        label: str = "",
    ) -> ProfileReport:
        """Nsight Compute's profile through the worker. With ``listed`` (the evaluation's own torch
        profile) the worker runs no fallback of its own: that list is the fallback."""
        started = time.monotonic()
        # Every worker of a host finds the same tools; any that has started says which.
        hellos = [slot.handle.hello for slot in self.pool(info).live if slot.handle.hello]
        tools = (hellos[0].get("tools") if hellos else None) or {}
        if listed is not None and not tools.get("ncu"):
            report = profiles.from_kernels(listed, self.tool_paths.missing("ncu"), label)
            return profiles.mark_own(report, source)
        frame: dict[str, Any] = {
            "cmd": "profile",
            "key": problem.hash,
            "settings": s.worker_dict(),
            "fallback": listed is None,
        }
        frame.update({"reference": True} if job is None else {"job": job})
        try:
            deferred = s.build_timeout_s if job and job.get("deferred") else 0.0
            answer = await self._command(
                info, problem, s, frame, {"profile"}, 2 * (s.profile_timeout_s + deferred) + 120
            )
        except EvaluatorError as exc:
            answer = {"source": "none", "reason": f"the profiling worker failed: {exc}", "shape": label}
        seconds = time.monotonic() - started
        report = profiles.from_answer(answer, source, s.profile_max_kernels, seconds)
        if report.source == "none" and listed is not None:
            fallback = profiles.from_kernels(listed, report.reason, report.shape or label, seconds)
            report = profiles.mark_own(fallback, source)
        return report

    async def _sanitize_job(
        self, problem: Problem, info: DeviceInfo, s: EvalSettings, job: dict[str, Any]
    ) -> str:
        """compute-sanitizer's first report on a candidate that failed with a memory error, or why
        there is none (the debug agent reads it as a log)."""
        frame = {"cmd": "sanitize", "key": problem.hash, "settings": s.worker_dict(), "job": job}
        try:
            deferred = s.build_timeout_s if job.get("deferred") else 0.0
            answer = await self._command(
                info, problem, s, frame, {"sanitized"}, s.sanitize_timeout_s + deferred + 120
            )
        except EvaluatorError as exc:
            return f"compute-sanitizer could not run: {exc}"[:2000]
        found = first_report(str(answer.get("report", "")))
        if found:
            return found
        reason = str(answer.get("reason") or "")
        return (
            "compute-sanitizer memcheck reported no error"
            + (f" ({reason})" if reason else "")
            + ": the fault may depend on timing or on memory torch's caching allocator owns"
        )[:2000]

    async def profile(
        self,
        problem: Problem,
        source: str | None,
        device: str = "auto",
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
    ) -> ProfileReport:
        """A profile of ``source`` (None: the problem's reference ``Model``) on demand: Nsight
        Compute's counters per kernel, else the torch profiler's kernel list. Never raises for the
        candidate or the machine: a CPU device, a candidate that does not build, a missing tool all
        give a report that says so. Raises ``ProblemError`` for a problem that does not load."""
        s = settings or self.settings
        info = await self._device(device)
        if info.kind != "cuda":
            return profiles.unavailable(f"profiling needs a GPU; this device is the {info.kind}")
        started = time.monotonic()

        async def note(message: str) -> None:
            if progress is not None:
                await progress(0.0 if message == "build" else 1.0, 2.0, message)

        job: dict[str, Any] | None = None
        if source is not None:
            static = check_candidate(source)
            if static.status is not None:
                return profiles.unavailable(f"the candidate cannot be profiled: {static.message}")
            staged = await self._stage(source, source_hash(source), info, s, static.needs_build, note, {})
            if staged.failure is not None:
                return profiles.unavailable(
                    f"the candidate does not build: {staged.failure.message[:1500]}",
                    time.monotonic() - started,
                )
            job = staged.job
        await note("profile")
        report = await self._profile_job(problem, source, info, s, job)
        report = report.model_copy(update={"seconds": round(time.monotonic() - started, 3)})
        if progress is not None:
            await progress(2.0, 2.0, f"profile: {report.source}")
        return report

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


def _job_label(frame: dict[str, Any]) -> str:
    """What a worker command is, as a waiting evaluation names it."""
    cmd = str(frame.get("cmd", "command"))
    return f"baseline {frame['name']}" if cmd == "baseline" and "name" in frame else cmd


def loaded_key(problem: Problem) -> str:
    """What a worker holds a loaded problem under: its hash, and for one that imports the user's code
    the digests of those files, so that a changed module is imported afresh, never run from the copy
    a worker loaded before (the worker forgets the old modules: ``trusted/worker.py``)."""
    roots = getattr(problem, "import_roots", ())
    if not roots:
        return problem.hash
    files = user_files(roots, [problem.source])
    return f"{problem.hash}-{digest_bytes(json.dumps(files, sort_keys=True).encode())[:8]}"


def _add(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    out = dict(a)
    for name, seconds in b.items():
        out[name] = round(out.get(name, 0.0) + seconds, 3)
    return out


def done_message(evaluation: Evaluation) -> str:
    """The last progress message: the verdict and where the time went, largest phases first."""
    phases = sorted(((n, v) for n, v in evaluation.phase_seconds.items() if v >= 0.05), key=lambda p: -p[1])
    spent = ", ".join(f"{n} {v:.1f} s" for n, v in phases[:6])
    return f"done: {evaluation.status.value} in {evaluation.wall_seconds or 0:.1f} s ({spent})"


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
