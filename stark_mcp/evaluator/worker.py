"""Where evaluations run. ``Worker`` is the seam; ``LocalWorker`` runs processes on this host.

A worker on another GPU or host implements the same three calls; ``Evaluator`` (the service)
keeps the caches, deduplication and cancellation, so callers never see which worker ran a job.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from stark_mcp.evaluator.baselines import time_baseline
from stark_mcp.evaluator.builds import BuildCache
from stark_mcp.evaluator.pipeline import fresh_seed, run_device_phase
from stark_mcp.evaluator.probe import DeviceInfo
from stark_mcp.evaluator.process import ChildProcess
from stark_mcp.evaluator.settings import EvalSettings
from stark_mcp.evaluator.trusted import next_trusted_record
from stark_mcp.problems import Problem
from stark_mcp.problems import source_hash
from stark_mcp.records import Evaluation

PhaseNote = Callable[[str], Awaitable[None]]


class Worker(Protocol):
    async def check_problem(self, problem: Problem, info: DeviceInfo, settings: EvalSettings) -> None: ...

    async def time_baselines(self, problem: Problem, info: DeviceInfo, names: list[str],
                             settings: EvalSettings, note: PhaseNote | None) -> dict[str, dict[str, Any]]: ...

    async def evaluate(self, problem: Problem, source: str, info: DeviceInfo, settings: EvalSettings,
                       note: PhaseNote | None) -> Evaluation: ...


class LocalWorker:
    """Builds on a bounded pool (in parallel, off the device); device phases one at a time per device.

    The per-device lock is FIFO, so waiting jobs form the device's queue.
    """

    def __init__(self, builds: BuildCache, build_workers: int) -> None:
        self.builds = builds
        self._build_slots = asyncio.Semaphore(build_workers)
        self._build_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._device_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    def device_lock(self, info: DeviceInfo) -> asyncio.Lock:
        return self._device_locks[f"{info.kind}:{info.name}"]

    async def check_problem(self, problem: Problem, info: DeviceInfo, settings: EvalSettings) -> None:
        spec = {"problem_source": problem.source, "device": info.kind, "init_seed": fresh_seed(),
                "trial_seed": fresh_seed()}
        timeout = settings.load_timeout_s + settings.correctness_timeout_s
        async with self.device_lock(info), ChildProcess(
                "check", spec, settings.device_env(info.kind), label="problem check") as child:
            await next_trusted_record(
                child, problem.name, time.monotonic() + timeout, what="problem check",
                late=f"import and run one forward within {timeout:g} s")

    async def time_baselines(self, problem: Problem, info: DeviceInfo, names: list[str],
                             settings: EvalSettings, note: PhaseNote | None) -> dict[str, dict[str, Any]]:
        entries: dict[str, dict[str, Any]] = {}
        async with self.device_lock(info):
            for name in names:
                if note is not None:
                    await note(f"baseline {name}")
                entries[name] = await time_baseline(problem, info.kind, name, settings)
        return entries

    async def evaluate(self, problem: Problem, source: str, info: DeviceInfo, settings: EvalSettings,
                       note: PhaseNote | None, needs_build: bool = True) -> Evaluation:
        digest = source_hash(source)
        phase_seconds: dict[str, float] = {}
        deferred = False
        build_logs: dict[str, str] = {}
        if needs_build:
            if note is not None:
                await note("build")
            start = time.monotonic()
            async with self._build_slots, self._build_locks[digest]:
                outcome = await self.builds.build(source, digest, info, settings.build_timeout_s)
            phase_seconds["build"] = round(time.monotonic() - start, 3)
            if not outcome.ok:
                assert outcome.status is not None
                return Evaluation(status=outcome.status, reason=outcome.reason, message=outcome.message,
                                  logs=outcome.logs, phase_seconds=phase_seconds)
            deferred = outcome.deferred
            build_logs = outcome.logs
        async with self.device_lock(info):
            if deferred:
                async with self._build_locks[digest]:
                    self.builds.clean_stale_locks(digest)
            result = await run_device_phase(
                problem, source, info.kind, settings, self.builds.env(digest, info), deferred, note)
        flags = list(result.flags) + (["build_deferred"] if deferred else [])
        return Evaluation(
            status=result.status, reason=result.reason, message=result.message,
            logs={**build_logs, **result.logs}, runtime=result.runtime, correctness=result.correctness,
            own_kernel_share=result.own_kernel_share, flags=flags,
            phase_seconds={**phase_seconds, **result.phase_seconds},
        )
