"""The parent's evaluation of a candidate, for ``Evaluator`` (``service.py``).

It answers from the signed result cache, shares identical in-flight evaluations, checks and stages
the candidate, has a worker evaluate it, adds the compile baselines, judges the time against the
speed-of-light floor and, on a GPU, adds the profile or the sanitizer's report; then accounts for
where the time went and caches the verdict.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from stark_mcp.device import Device
from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.host import worker_results
from stark_mcp.evaluator.host.baselines import ParentBaselines
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.devices import ParentDevices
from stark_mcp.evaluator.host.integrity import Integrity
from stark_mcp.evaluator.host.profile_runs import ParentProfiles
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.host.signed_caches import ResultCache
from stark_mcp.evaluator.host.sol_floor import SolFloors
from stark_mcp.evaluator.host.staging import ParentStaging
from stark_mcp.evaluator.host.verdict_dependencies import changes, reevaluated_message, stack_tag
from stark_mcp.evaluator.host.worker_handles import WorkerCrashed
from stark_mcp.problems import Problem, ProblemError
from stark_mcp.progress import Progress
from stark_mcp.records import Dependencies, Evaluation, Status, TimingStats
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


@dataclass
class _Shared:
    task: asyncio.Task[Evaluation]
    waiters: int = 0


class ParentEvaluation:
    """``evaluate`` and the SOL record, over the other parent parts."""

    def __init__(
        self,
        devices: ParentDevices,
        staging: ParentStaging,
        baselines: ParentBaselines,
        profiles: ParentProfiles,
        sol: SolFloors,
        cache_dir: Path,
        integrity: Integrity,
        settings: EvalSettings,
    ) -> None:
        self.devices = devices
        self.staging = staging
        self.baselines = baselines
        self.profiles = profiles
        self.sol = sol
        self.cache_dir = cache_dir
        self.integrity = integrity
        self.settings = settings
        self._inflight: dict[tuple[str, ...], _Shared] = {}

    def tasks(self) -> list[asyncio.Task[Evaluation]]:
        """The evaluations under way (what closing the evaluator cancels)."""
        return [shared.task for shared in self._inflight.values()]

    async def evaluate(
        self,
        problem: Problem,
        source: str | Candidate,
        device: Device | str = Device.AUTO,
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
        use_cache: bool = True,
        wait_for_baselines: bool = True,
    ) -> Evaluation:
        """``wait_for_baselines=False``: compile baselines not timed yet are neither timed nor
        waited for; the evaluation is flagged ``baseline_pending:<name>`` and not cached, and its
        caller adds them when they arrive (``RunService`` does)."""
        candidate = Candidate.of(source)
        s = settings or self.settings
        self.devices.start_zygote()
        asked = time.monotonic()
        info = await self.devices.device(device)
        if not use_cache:
            self.devices.warm_worker(info, problem, s)
        isolation = await self.devices.isolation()
        deps = await self.devices.dependencies(problem, info, s, candidate)
        # a fresh cache probes the device and the sandbox (a process that initialises CUDA: seconds)
        probe_s = time.monotonic() - asked
        key = (problem.hash, candidate.hash, info.name, s.settings_hash, isolation.level, deps.digest)
        if not wait_for_baselines:
            key = (*key, "no-wait")
        results = ResultCache(self.cache_dir / "results", self.integrity, reuse=isolation.level != "process")
        reevaluated = None
        if use_cache:
            # stored under the first six parts (only a result with every baseline is stored): it
            # answers a caller that would not wait for baselines as well
            hit = await asyncio.to_thread(results.get, key[:6])
            if hit is None:  # a result for the same texts made under other dependencies says what changed
                self.devices.warm_worker(info, problem, s)
                before = await asyncio.to_thread(results.previous, key[:6])
                what = changes(before.dependencies, deps) if before is not None else []
                reevaluated = reevaluated_message(what) if what else None
            if hit is not None:
                if s.profile and hit.passed and hit.device == "cuda" and hit.profile is None:
                    # Cached before profiles existed, or with profiling off: the verdict stands, the
                    # profile is added and kept with it.
                    profile = await self.profiles.profile(problem, candidate, device=info.kind, settings=s)
                    hit = hit.model_copy(update={"profile": profile})
                    await asyncio.to_thread(results.put, key[:6], hit)
                return hit.model_copy(update={"cached": True})
        shared = self._inflight.get(key)
        if shared is None:
            task = asyncio.create_task(
                self._evaluate_uncached(
                    problem, candidate, info, s, progress, results, key, deps, wait_for_baselines, probe_s
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
        candidate: Candidate,
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
        origin = worker_results.EvaluationOrigin(
            device=info.kind,
            device_name=info.name,
            problem_hash=problem.hash,
            source_hash=key[1],
            settings_hash=s.settings_hash,
            dependencies=deps,
        )

        async def note(message: str) -> None:
            if progress is not None:
                await progress(_STEPS.get(message, 0.0), _TOTAL, message)

        static = candidate.static
        phase_seconds = {"probe": round(probe_s, 3), "static": round(time.monotonic() - started - probe_s, 3)}
        if static.status is not None:
            evaluation = Evaluation(
                status=static.status, reason=static.reason, message=static.message, flags=static.flags,
                phase_seconds=phase_seconds, **origin.fields(),
            )
        else:
            evaluation = await self._device_evaluation(
                problem, candidate, info, s, note, static.needs_build, origin, phase_seconds,
                wait_for_baselines,
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

    async def _device_evaluation(
        self,
        problem: Problem,
        candidate: Candidate,
        info: DeviceInfo,
        s: EvalSettings,
        note: Callable[[str], Awaitable[None]],
        needs_build: bool,
        origin: worker_results.EvaluationOrigin,
        phase_seconds: dict[str, float],
        wait_for_baselines: bool = True,
    ) -> Evaluation:
        digest = origin.source_hash
        if needs_build and not await asyncio.to_thread(self.staging.builds.verified, digest):
            self.devices.warm_worker(info, problem, s, queue=True)  # a real build: the worker starts under it
        staged = await self.staging.stage(candidate.source, digest, info, s, needs_build, note, phase_seconds)
        if staged.failure is not None:
            return staged.failure.model_copy(update=origin.fields())
        deferred, build_logs = staged.deferred, staged.logs

        async def on_progress(progress: wire.Progress) -> None:
            await note(progress.phase)

        assert staged.job is not None  # staged without a failure
        frame = wire.EvaluateCommand(
            id=digest, key=problem.hash, settings=s.worker_settings(info.kind), job=staged.job
        )
        budget = (
            s.load_timeout_s
            + s.correctness_timeout_s
            + s.timing_timeout_s
            + 300
            + (s.build_timeout_s if deferred else 0.0)
        )
        t0 = time.monotonic()
        timings: dict[str, float] = {}
        answer = await self.devices.command(
            info, problem, s, frame, {wire.Result}, budget, on_progress, timings
        )
        result = worker_results.parse(answer.to_frame())
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
            extra = await self.baselines.compile_baselines(problem, info, s, result, wait_for_baselines)
            result.phase_seconds["baselines"] = round(time.monotonic() - t1, 3)
        evaluation = worker_results.evaluation(
            result, info.kind, extra, origin, candidate, s.min_own_kernel_share
        )
        if evaluation.passed:  # the floor check may reject an impossible time (docs/sol.md)
            evaluation = await self._sol_judge(problem, info, s, evaluation)
        flags = list(evaluation.flags)
        if evaluation.passed:
            missing = "missing" if wait_for_baselines else "pending"
            flags += [f"baseline_{missing}:{n}" for n in s.baselines if n not in evaluation.baselines]
            if evaluation.speedups.get("eager", 0.0) > s.implausible_speedup:
                flags.append("implausible_speedup")
        logs = {**build_logs, **evaluation.logs}
        update: dict[str, object] = {"flags": flags, "logs": logs, "extensions": staged.extensions}
        if info.kind == "cuda":
            after = await self.profiles.after_verdict(
                problem, candidate, info, s, note, staged.job, result, evaluation
            )
            if after.profile is not None:
                update["profile"] = after.profile
            if after.phase_seconds is not None:
                update["phase_seconds"] = after.phase_seconds
            if after.sanitizer is not None:
                update["logs"] = {**logs, "compute-sanitizer": after.sanitizer}
        return evaluation.model_copy(update=update)

    # -- speed of light ------------------------------------------------------------------------------
    async def _sol_judge(
        self, problem: Problem, info: DeviceInfo, s: EvalSettings, evaluation: Evaluation
    ) -> Evaluation:
        """The SOL record and floor check; an evaluation without a floor is left as it is."""

        async def ask(frame: wire.Command, expect: set[type[wire.Answer]], timeout: float) -> wire.Answer:
            return await self.devices.command(info, problem, s, frame, expect, timeout)

        t0 = time.monotonic()
        try:
            deps = evaluation.dependencies or await self.devices.dependencies(problem, info, s)
            judged = await self.sol.judge(problem, info, evaluation, ask, stack_tag(deps))
        except (WorkerCrashed, ProblemError, EvaluatorError) as exc:
            logs = {**evaluation.logs, "sol": f"no floor: {exc}"[:1500]}
            judged = evaluation.model_copy(update={"logs": logs})
        phases = {**judged.phase_seconds, "sol": round(time.monotonic() - t0, 3)}
        return judged.model_copy(update={"phase_seconds": phases})

    async def sol_of(
        self, problem: Problem, evaluation: Evaluation, device: Device | str = Device.AUTO
    ) -> SolReport | None:
        """The SOL record of a time measured outside ``evaluate`` (the run's root: the reference
        timed as the eager baseline), or None; never a verdict."""
        info = await self.devices.device(device)

        async def ask(frame: wire.Command, expect: set[type[wire.Answer]], timeout: float) -> wire.Answer:
            return await self.devices.command(info, problem, self.settings, frame, expect, timeout)

        deps = await self.devices.dependencies(problem, info, self.settings)
        return (await self.sol.judge(problem, info, evaluation, ask, stack_tag(deps))).sol


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
