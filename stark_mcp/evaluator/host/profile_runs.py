"""The parent's profiles and sanitizer runs, for ``Evaluator`` (``service.py``).

After a GPU verdict: Nsight Compute's profile of a candidate that passed, compute-sanitizer's first
report on one that failed with a memory error; neither ever changes the verdict or a time. And a
profile on demand (``Evaluator.profile``), of a candidate or of the problem's reference.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from stark_mcp.device import Device
from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.host import profile_reports, worker_results
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.devices import ParentDevices
from stark_mcp.evaluator.host.sanitizer_report import first_report, is_memory_error
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.host.staging import ParentStaging
from stark_mcp.problems import Problem
from stark_mcp.progress import Progress
from stark_mcp.records import Evaluation, ProfileReport, Status


@dataclass(frozen=True)
class AfterVerdict:
    """What a GPU evaluation gains after its verdict: Nsight Compute's profile of a candidate that
    passed, or compute-sanitizer's first report (a log) on one that failed on memory; and the
    phases' times with the step it took. None: left as the evaluation has it."""

    profile: ProfileReport | None = None
    sanitizer: str | None = None
    phase_seconds: dict[str, float] | None = None


class ParentProfiles:
    """Profiles and sanitizer runs through the devices' workers."""

    def __init__(
        self, devices: ParentDevices, staging: ParentStaging, tool_paths: ToolPaths, settings: EvalSettings
    ) -> None:
        self.devices = devices
        self.staging = staging
        self.tool_paths = tool_paths  # Nsight Compute and compute-sanitizer
        self.settings = settings

    async def after_verdict(
        self,
        problem: Problem,
        source: str | Candidate,
        info: DeviceInfo,
        s: EvalSettings,
        note: Callable[[str], Awaitable[None]],
        job: wire.Job | None,
        result: worker_results.WorkerResult,
        evaluation: Evaluation,
    ) -> AfterVerdict:
        """What the profile or the sanitizer adds to a GPU evaluation."""
        phases = dict(evaluation.phase_seconds)
        if evaluation.passed and s.profile:
            await note("profile")
            t0 = time.monotonic()
            label = result.shapes[0].label if result.shapes else ""
            listed = result.launches or result.kernels
            report = await self.profile_job(problem, source, info, s, job, listed, label)
            phases["profile"] = round(time.monotonic() - t0, 3)
            return AfterVerdict(profile=report, phase_seconds=phases)
        text = evaluation.message + "\n" + evaluation.logs.get("candidate", "")
        failed = evaluation.status in (Status.RUNTIME_ERROR, Status.LOAD_ERROR)
        failed_on_memory = failed and is_memory_error(text)
        if s.sanitize and failed_on_memory:
            await note("sanitizer")
            t0 = time.monotonic()
            found = await self._sanitize_job(problem, info, s, job)
            phases["sanitizer"] = round(time.monotonic() - t0, 3)
            return AfterVerdict(phase_seconds=phases, sanitizer=found)
        return AfterVerdict()

    async def profile_job(
        self,
        problem: Problem,
        source: str | Candidate | None,
        info: DeviceInfo,
        s: EvalSettings,
        job: wire.Job | None,
        listed: list[Any] | None = None,
        label: str = "",
    ) -> ProfileReport:
        """Nsight Compute's profile through the worker (of the problem's reference when ``job`` is
        None). With ``listed`` (the evaluation's own torch profile) the worker runs no fallback of
        its own: that list is the fallback."""
        started = time.monotonic()
        # Every worker of a host finds the same tools; any that has started says which.
        hellos = [slot.handle.hello for slot in self.devices.pool(info).live if slot.handle.hello]
        tools = (hellos[0].tools if hellos else None) or {}
        if listed is not None and not tools.get("ncu"):
            report = profile_reports.from_kernels(listed, self.tool_paths.missing("ncu"), label)
            return profile_reports.mark_own(report, source)
        frame = wire.ProfileCommand(
            key=problem.hash, settings=s.worker_settings(info.kind), fallback=listed is None, job=job
        )
        answer: dict[str, Any]  # free-form: the answer's frame, read by from_answer tolerating any gap
        try:
            deferred = s.build_timeout_s if job and job.deferred else 0.0
            got = await self.devices.command(
                info, problem, s, frame, {wire.Profile}, 2 * (s.profile_timeout_s + deferred) + 120
            )
            answer = got.to_frame()  # profile_reports.from_answer reads what travels, tolerating any gap
        except EvaluatorError as exc:
            answer = {"source": "none", "reason": f"the profiling worker failed: {exc}", "shape": label}
        seconds = time.monotonic() - started
        report = profile_reports.from_answer(answer, source, s.profile_max_kernels, seconds)
        if report.source == "none" and listed is not None:
            fallback = profile_reports.from_kernels(listed, report.reason, report.shape or label, seconds)
            report = profile_reports.mark_own(fallback, source)
        return report

    async def _sanitize_job(
        self, problem: Problem, info: DeviceInfo, s: EvalSettings, job: wire.Job | None
    ) -> str:
        """compute-sanitizer's first report on a candidate that failed with a memory error, or why
        there is none (the debug agent reads it as a log)."""
        assert job is not None  # a verdict from the device: the candidate was staged
        frame = wire.SanitizeCommand(key=problem.hash, settings=s.worker_settings(info.kind), job=job)
        try:
            deferred = s.build_timeout_s if job.deferred else 0.0
            answer = await self.devices.command(
                info, problem, s, frame, {wire.Sanitized}, s.sanitize_timeout_s + deferred + 120
            )
        except EvaluatorError as exc:
            return f"compute-sanitizer could not run: {exc}"[:2000]
        assert isinstance(answer, wire.Sanitized)
        found = first_report(answer.report)
        if found:
            return found
        reason = answer.reason
        return (
            "compute-sanitizer memcheck reported no error"
            + (f" ({reason})" if reason else "")
            + ": the fault may depend on timing or on memory torch's caching allocator owns"
        )[:2000]

    async def profile(
        self,
        problem: Problem,
        source: str | Candidate | None,
        device: Device | str = Device.AUTO,
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
    ) -> ProfileReport:
        """A profile of ``source`` (None: the problem's reference ``Model``) on demand: Nsight
        Compute's counters per kernel, else the torch profiler's kernel list. Never raises for the
        candidate or the machine: a CPU device, a candidate that does not build, a missing tool all
        give a report that says so. Raises ``ProblemError`` for a problem that does not load."""
        s = settings or self.settings
        info = await self.devices.device(device)
        if info.kind != "cuda":
            return profile_reports.unavailable(f"profiling needs a GPU; this device is the {info.kind}")
        started = time.monotonic()

        async def note(message: str) -> None:
            if progress is not None:
                await progress(0.0 if message == "build" else 1.0, 2.0, message)

        job: wire.Job | None = None
        if source is not None:
            source = Candidate.of(source)
            static = source.static
            if static.status is not None:
                return profile_reports.unavailable(f"the candidate cannot be profiled: {static.message}")
            staged = await self.staging.stage(
                source.source, source.hash, info, s, static.needs_build, note, {}
            )
            if staged.failure is not None:
                return profile_reports.unavailable(
                    f"the candidate does not build: {staged.failure.message[:1500]}",
                    time.monotonic() - started,
                )
            job = staged.job
        await note("profile")
        report = await self.profile_job(problem, source, info, s, job)
        report = report.model_copy(update={"seconds": round(time.monotonic() - started, 3)})
        if progress is not None:
            await progress(2.0, 2.0, f"profile: {report.source}")
        return report
