"""The device phase of one evaluation: reference and candidate processes side by side.

The trusted reference process and the candidate process start together (each pays ~3 s for
``import torch``). The candidate sends its raw outputs and waits; the parent compares them with
the reference's and either kills the candidate or lets it go on to timing.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from stark_mcp.evaluator.compare import Contract, TrialCheck, check_trial, summarize
from stark_mcp.evaluator.kernels import own_kernel_share
from stark_mcp.evaluator.logs import trim_compiler_log, trim_tail
from stark_mcp.evaluator.process import ChannelError, ChildProcess
from stark_mcp.evaluator.settings import EvalSettings
from stark_mcp.evaluator.stats import timing_stats
from stark_mcp.evaluator.trusted import next_trusted_record
from stark_mcp.problems import Problem, ProblemError
from stark_mcp.records import CorrectnessReport, Status, TimingStats

CHILD_ERROR_STATUSES = {s.value: s for s in (Status.BUILD_ERROR, Status.LOAD_ERROR, Status.RUNTIME_ERROR,
                                             Status.REJECTED)}


def fresh_seed() -> int:
    return secrets.randbits(62)


@dataclass
class Seeds:
    """Secret per-evaluation seeds, never the task file's own."""

    init: int
    trials: list[int]
    timing: list[int]

    @classmethod
    def fresh(cls, settings: EvalSettings) -> Seeds:
        return cls(fresh_seed(), [fresh_seed() for _ in range(settings.trials)],
                   [fresh_seed() for _ in range(settings.input_sets)])


@dataclass
class DeviceOutcome:
    """What the device phase found; the caller adds baselines, speedups and cache keys."""

    status: Status
    reason: str | None = None
    message: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    runtime: TimingStats | None = None
    correctness: CorrectnessReport | None = None
    own_kernel_share: float | None = None
    flags: list[str] = field(default_factory=list)
    phase_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class ReferenceTrial:
    native: dict[str, Any]
    ref64: dict[str, Any] | None
    note: str


async def run_reference(problem: Problem, device: str, seeds: Seeds, timeout: float,
                        env: dict[str, str]) -> list[ReferenceTrial]:
    """Expected outputs from the trusted process; ProblemError if the reference itself fails."""
    spec = {"problem_source": problem.source, "device": device, "init_seed": seeds.init,
            "trial_seeds": seeds.trials}
    trials: list[ReferenceTrial] = []
    async with ChildProcess("reference", spec, env, label="reference") as child:
        deadline = time.monotonic() + timeout
        while True:
            record = await next_trusted_record(
                child, problem.name, deadline, what="reference",
                late=f"finish {len(seeds.trials)} trials within {timeout:g} s")
            if record["kind"] == "reference":
                trials.append(ReferenceTrial(record["native"], record.get("ref64"), str(record.get("note", ""))))
            if record["kind"] == "done":
                return trials


class _Driver:
    """Reads the candidate's records phase by phase, enforcing each phase's budget."""

    def __init__(self, child: ChildProcess, reference: asyncio.Task[list[ReferenceTrial]],
                 settings: EvalSettings, source: str, build_deferred: bool, progress: Any) -> None:
        self.child, self.reference, self.s, self.source = child, reference, settings, source
        self.progress = progress
        load_budget = settings.load_timeout_s + (settings.build_timeout_s if build_deferred else 0.0)
        self.budgets = {"load": load_budget, "correctness": settings.correctness_timeout_s,
                        "timing": settings.timing_timeout_s}
        self.phase = "load"
        self.phase_started = time.monotonic()
        self.phase_seconds: dict[str, float] = {}
        self.outputs: dict[Any, dict[str, Any]] = {}
        self.timing: dict[str, Any] | None = None
        self.kernels: list[list[Any]] | None = None
        self.flags: list[str] = []
        self.correctness: CorrectnessReport | None = None
        self.references: list[ReferenceTrial] = []

    def fail(self, status: Status, reason: str, message: str, **logs: str) -> DeviceOutcome:
        self._close_phase()
        all_logs = {k: v for k, v in logs.items() if v}
        candidate_log = self.child.log()
        if candidate_log:
            all_logs["candidate"] = candidate_log
        return DeviceOutcome(status, reason, message, all_logs, correctness=self.correctness,
                             flags=self.flags, phase_seconds=self.phase_seconds)

    def _close_phase(self) -> None:
        self.phase_seconds[self.phase] = round(time.monotonic() - self.phase_started, 3)

    async def _enter(self, phase: str) -> None:
        self._close_phase()
        self.phase, self.phase_started = phase, time.monotonic()
        if self.progress is not None:
            await self.progress(f"candidate: {phase}")

    async def run(self) -> DeviceOutcome:
        while True:
            budget = self.budgets[self.phase]
            remaining = budget - (time.monotonic() - self.phase_started)
            try:
                record = await self.child.next_record(max(0.0, remaining))
            except asyncio.TimeoutError:
                self.child.kill()
                return self.fail(Status.TIMEOUT, self.phase, f"the {self.phase} phase ran past its {budget:g} s "
                                 "budget; the candidate's process group was killed")
            except ChannelError as exc:
                self.child.kill()
                return self.fail(Status.RUNTIME_ERROR, "channel", f"invalid result record: {exc}")
            if record is None:
                return await self._died()
            kind = record["kind"]
            if kind == "phase" and record.get("phase") in self.budgets:
                await self._enter(str(record["phase"]))
            elif kind == "error":
                return self._child_error(record)
            elif kind == "outputs":
                self.outputs[record.get("trial")] = record.get("outputs") or {}
            elif kind == "await":
                verdict = await self._judge()
                if verdict is not None:
                    return verdict
                if not await self.child.send({"cmd": "time"}):
                    return await self._died()
            elif kind == "timing":
                self.timing = record
            elif kind == "kernels":
                self.kernels = record.get("kernels")
            elif kind == "done":
                return self._finish()

    async def _died(self) -> DeviceOutcome:
        code, sig = await self.child.exit_status()
        if sig:
            return self.fail(Status.RUNTIME_ERROR, "signal",
                             f"the candidate process was killed by {sig} during the {self.phase} phase")
        return self.fail(Status.RUNTIME_ERROR, "no_result", f"the candidate process exited with code {code} "
                         f"during the {self.phase} phase without reporting a result")

    def _child_error(self, record: dict[str, Any]) -> DeviceOutcome:
        if record.get("status") == "problem":  # the task's own code failed in the harness
            raise ProblemError(f"{record.get('reason')} failed: {record.get('message')}\n"
                               + trim_tail(str(record.get("traceback", "")), 2000))
        status = CHILD_ERROR_STATUSES.get(str(record.get("status")))
        if status is None:
            return self.fail(Status.RUNTIME_ERROR, "channel", f"invalid error record status {record.get('status')!r}")
        message = str(record.get("message", ""))
        tb = str(record.get("traceback", ""))
        if status is Status.BUILD_ERROR:
            log = trim_compiler_log(message)
            return self.fail(status, "compile", "build failed during import on the device", build=log)
        return self.fail(status, str(record.get("reason") or "exception"), message[:4000], traceback=trim_tail(tb))

    async def _judge(self) -> DeviceOutcome | None:
        """Compare every trial; a failure ends the evaluation before any timing."""
        self._close_phase()
        waited = time.monotonic()
        references = await self.reference  # ProblemError propagates: the task, not the candidate, is broken
        self.phase_seconds["reference_wait"] = round(time.monotonic() - waited, 3)
        contract = Contract(self.s.tolerance_factor, self.s.tolerance_floor, self.s.fallback_tolerance)
        checks: list[TrialCheck] = []
        for trial, ref in enumerate(references):
            cand = self.outputs.get(trial)
            if cand is None:
                return self.fail(Status.RUNTIME_ERROR, "no_result", f"no output for correctness trial {trial}")
            checks.append(check_trial(cand, ref.native, ref.ref64, contract))
        if any(ref.ref64 is None for ref in references) or not all(c.used_fp64 for c in checks if c.ok):
            self.flags.append("no_fp64_reference")
        self.correctness = summarize(checks)
        self.references = references
        self.phase_started = time.monotonic()
        first_bad = next((c for c in checks if not c.ok), None)
        if first_bad is not None:
            self.child.kill()
            trial = checks.index(first_bad)
            assert first_bad.status is not None
            return self.fail(first_bad.status, first_bad.reason or "tolerance",
                             f"trial {trial + 1}/{len(checks)}: {first_bad.message}")
        return None

    def _finish(self) -> DeviceOutcome:
        self._close_phase()
        if self.timing is None or "recheck" not in self.outputs or not self.references:
            return self.fail(Status.RUNTIME_ERROR, "no_result", "the candidate finished without timing results")
        try:
            runtime = timing_stats(self.timing.get("samples_ms") or [])
        except (ValueError, TypeError) as exc:
            return self.fail(Status.RUNTIME_ERROR, "channel", f"invalid timing record: {exc}")
        contract = Contract(self.s.tolerance_factor, self.s.tolerance_floor, self.s.fallback_tolerance)
        ref = self.references[0]
        recheck = check_trial(self.outputs["recheck"], ref.native, ref.ref64, contract)
        if not recheck.ok:
            return self.fail(Status.WRONG_OUTPUT, "inconsistent",
                             f"correct during the correctness trials but wrong after timing: {recheck.message}")
        for flag in self.timing.get("flags") or []:
            if isinstance(flag, str) and flag not in self.flags:
                self.flags.append(flag)
        share = None
        if self.kernels:
            share = own_kernel_share([(str(n), float(t)) for n, t in self.kernels], self.source)
            if share is not None and share < self.s.min_own_kernel_share:
                self.flags.append("low_own_kernel_share")
        return DeviceOutcome(Status.PASSED, None, "correct on all trials", runtime=runtime,
                             correctness=self.correctness, own_kernel_share=share, flags=self.flags,
                             phase_seconds=self.phase_seconds)


async def run_device_phase(problem: Problem, source: str, device: str, settings: EvalSettings,
                           env: dict[str, str], build_deferred: bool, progress: Any = None) -> DeviceOutcome:
    """Reference and candidate concurrently; every process is killed when this returns or is cancelled."""
    seeds = Seeds.fresh(settings)
    reference = asyncio.create_task(run_reference(
        problem, device, seeds, settings.load_timeout_s + settings.correctness_timeout_s, settings.device_env(device)))
    spec = {"problem_source": problem.source, "candidate_source": source, "device": device,
            "init_seed": seeds.init, "trial_seeds": seeds.trials, "timing_seeds": seeds.timing,
            "timing": settings.timing_spec()}
    try:
        async with ChildProcess("candidate", spec, env | settings.device_env(device), label="candidate") as child:
            return await _Driver(child, reference, settings, source, build_deferred, progress).run()
    finally:
        if not reference.done():
            reference.cancel()
        await asyncio.gather(reference, return_exceptions=True)
