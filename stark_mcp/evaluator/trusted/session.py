"""One candidate's evaluation inside the trusted worker: start its runner, check it, time it beside
the baseline, and write the result (a plain dict; the parent validates it into an ``Evaluation``).

Order of events:
  1. the candidate's runner starts in its jail, imports and constructs ``ModelNew`` (load);
  2. ``trials`` calls per shape, every one on fresh inputs and every output checked (correctness);
  3. per shape, warm-up calls, then blocks of baseline calls (candidate frozen) and candidate calls,
     until the timing budget is spent; a secret random subset of candidate calls is checked, and at
     least ``min_timed_checks`` of them at random positions (timing);
  4. the figure of record per shape: the candidate's reported times, bounded by our bracket minus
     the overhead calibrated on the baseline (``timing.py``).
Every call the candidate sees looks the same: fresh inputs in a rotating slot, the same GO, the same
DONE; whether it is checked is decided after it answers. Standard library and torch only.
"""

from __future__ import annotations

import math
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.common.control import ControlError
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.sandbox.launch import JailCpu
from stark_mcp.evaluator.trusted import compare, timing
from stark_mcp.evaluator.trusted.driver import DeviceTools, Driver, Made, give_back_cached
from stark_mcp.evaluator.trusted.problem import LoadedProblem, ProblemFailure, ResourceExhausted
from stark_mcp.evaluator.trusted.runner_memory import OutputUnreadable
from stark_mcp.evaluator.trusted.runners import RunnerDied, RunnerHandle, RunnerTimeout

CANDIDATE_STATUSES = {"build_error", "load_error", "runtime_error", "rejected"}
CALL_ERRORS = {("runtime_error", "exception"), ("rejected", "tamper")}
JIT_WARMUP_CALLS = 20  # extra warm-up calls at most while a shape's calls still compile or autotune


class Stop(Exception):
    """Ends the evaluation with a verdict."""

    def __init__(self, status: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class InfraError(Exception):
    """The machine, not the candidate or the problem, failed (a busy GPU, a dead baseline)."""


class DeviceBusy(InfraError):
    """Another process's work on the GPU, seen with the candidate's jail already gone."""


# What the trusted side can fail with while a candidate lives beside it. Each may be the candidate's
# doing (it holds the device's memory, a cuBLAS workspace, the baseline's room), so none is taken at
# its word until the failed steps have been tried again alone (``Session._alone``).
TRUSTED_FAILURES = (ProblemFailure, ResourceExhausted, torch.OutOfMemoryError, InfraError)


@dataclass
class Budget:
    phase: str
    seconds: float
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        left = self.seconds - (time.monotonic() - self.started)
        if left <= 0:
            raise Stop(
                "timeout",
                self.phase,
                f"the {self.phase} phase ran past its {self.seconds:g} s budget; "
                "the candidate's processes were killed",
            )
        return left


# CPU that processes which ended between two freezes may have used without a charge: the cgroup counts
# in microseconds, the live clocks in nanoseconds. Honest candidates leave no dead processes at all.
WINDOW_ALLOWANCE_NS = 20_000


@dataclass
class CpuWindow:
    """The candidate jail's CPU between two freezes: its cgroup's total against its live processes'.

    Each call's bracket is read from the clocks of the jail's live processes, which see a process that
    ended in between only through its parent's tick-granular child times: work done in a child that
    lives for one call (a clone sharing its memory, a fork) would be missed by every call's median.
    The jail's cgroup counts every process that ever ran in it, to the microsecond; frozen, the two
    agree but for the processes that ended. Their CPU (less an allowance) is spread over the window's
    timed calls. Work of the live processes between calls is the harness's, on both runners alike."""

    start: JailCpu | None = None
    calls: int = 0
    timed: list[int] = field(default_factory=list)  # indices of the window's timed samples
    hidden_ns: int = 0  # charged in this shape's timing loop, for the finding
    charged_calls: int = 0

    def settle(self, frozen: JailCpu | None, cand: timing.Samples) -> None:
        if frozen is None:
            return
        if self.start is not None and self.calls:
            excess = frozen.ended_since(self.start) - WINDOW_ALLOWANCE_NS
            if excess > 0 and self.timed:
                per_call_ms = excess / self.calls / 1e6
                for i in self.timed:
                    cand.bracket_ms[i] += per_call_ms
                self.hidden_ns += excess
                self.charged_calls += len(self.timed)
        self.start, self.calls, self.timed = frozen, 0, []


class Session:
    def __init__(
        self,
        problem: LoadedProblem,
        baseline: Driver,
        tools: DeviceTools,
        settings: WorkerSettings,
        emit: Callable[[str], None],
    ) -> None:
        self.problem, self.baseline, self.tools, self.s, self.emit = problem, baseline, tools, settings, emit
        self.contract = compare.Contract(
            settings.tolerance_factor, settings.tolerance_floor, settings.fallback_tolerance
        )
        self.checks: list[compare.TrialCheck] = []
        self.findings: list[str] = []
        self.flags: list[str] = []
        self.phase_seconds: dict[str, float] = {}
        self.parts: dict[str, float] = {}  # inputs, reference, compare: seconds inside other phases
        self.calls = self.checked = self.timed = self.timed_checked = 0
        self.driver: Driver | None = None
        self.kernels: list[list[Any]] | None = (
            None  # reported by the candidate's own profiler: information only
        )
        self.launches: list[dict[str, Any]] | None = None  # the same, per launch with its shape
        self.rng = random.Random(secrets.randbits(64))
        self.window = CpuWindow()  # CPU: the candidate jail's whole CPU time between two freezes
        self.hidden_shapes: set[int] = set()  # shapes whose calls did work the jail's live clocks missed

    # -- entry ---------------------------------------------------------------------------------------
    def run(self, runner: RunnerHandle, job: dict[str, Any]) -> dict[str, Any]:
        """Evaluate with ``runner`` (started, waiting for its setup); ``job`` says where its files are."""
        result: dict[str, Any] = {}
        try:
            try:
                self._load(runner, job)
                self._phase("correctness", self._correctness)
                shapes = self._phase("timing", self._timing)
                if runner.jail is not None and runner.jail.oom_killed():  # a helper died for it
                    raise Stop("runtime_error", "resource", "a process of the candidate's was killed")
            except TRUSTED_FAILURES as failure:
                if isinstance(failure, DeviceBusy) or self.driver is None:
                    raise
                raise self._alone(failure) from None
            result = {
                "status": "passed",
                "reason": None,
                "message": "correct on every checked call",
                "shapes": shapes,
            }
        except Stop as stop:
            result = {"status": stop.status, "reason": stop.reason, "message": stop.message}
            result = out_of_memory(runner, stop) or result
        finally:
            started = time.monotonic()
            if self.driver is not None:
                self.driver.close()  # the log pipe drains to its end once the jail is gone
            else:
                runner.close()
            log = runner.log.text() if runner.log else ""
            self.phase_seconds["teardown"] = round(time.monotonic() - started, 3)
        if log and result.get("status") != "passed":
            result["logs"] = {"candidate": log}
        result.update(
            kernels=self.kernels,
            launches=self.launches,
            correctness=compare.summarize(self.checks) if self.checks else None,
            findings=self.findings,
            flags=self.flags,
            phase_seconds=self.phase_seconds,
            counts={
                "calls": self.calls,
                "checked_calls": self.checked,
                "timed_calls": self.timed,
                "timed_checked": self.timed_checked,
            },
        )
        return result

    def _phase(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run a phase; the time its calls spent generating inputs, in the reference and comparing is
        reported under those names instead, so the phases still add up to the wall time."""
        self.emit(name)
        started = time.monotonic()
        before = sum(self.parts.values())
        inputs_before = self._input_seconds()
        try:
            return fn()
        finally:
            self.parts["inputs"] = self.parts.get("inputs", 0.0) + self._input_seconds() - inputs_before
            inner = sum(self.parts.values()) - before
            self.phase_seconds[name] = round(time.monotonic() - started - inner, 3)
            for part, seconds in self.parts.items():
                self.phase_seconds[part] = round(seconds, 3)

    def _input_seconds(self) -> float:
        return self.baseline.input_seconds + (self.driver.input_seconds if self.driver is not None else 0.0)

    def _timed(self, part: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        try:
            return fn()
        finally:
            self.parts[part] = self.parts.get(part, 0.0) + time.monotonic() - started

    # -- load ----------------------------------------------------------------------------------------
    def _load(self, runner: RunnerHandle, job: dict[str, Any]) -> None:
        self.emit("load")
        started = time.monotonic()
        self.tools.calibrate()  # the idle probe, measured now: clocks and load as they are for this run
        self.driver = Driver(
            self.problem, runner, self.tools, int(job["slots"]), self.s.bracket_after_inputs
        )
        setup = candidate_setup(self.problem, self.driver, job, self.s)
        budget = load_budget(self.s, job)
        try:
            frame = runner.setup(setup, self.driver.regions(), budget)
        except RunnerTimeout:
            raise Stop(
                "timeout",
                "load",
                f"the load phase ran past its {budget:g} s budget; the candidate's processes were killed",
            ) from None
        except RunnerDied as died:
            raise Stop(
                "runtime_error",
                "signal" if "killed" in died.how else "no_result",
                f"the candidate process {died.how} while loading",
            ) from None
        except frames.FrameError as exc:
            raise Stop(
                "runtime_error", "channel", f"invalid setup answer from the candidate: {exc}"
            ) from None
        finally:
            self.phase_seconds["load"] = round(time.monotonic() - started, 3)
        if frame.get("kind") == "ready":
            changed = frame.get("flags_changed")
            if isinstance(changed, list) and changed:
                self.findings.append(
                    "global torch flags changed at import: " + "; ".join(str(c)[:120] for c in changed[:8])
                )
            return
        status, reason = frame.get("status"), frame.get("reason")
        if frame.get("kind") != "error" or status not in CANDIDATE_STATUSES or not isinstance(reason, str):
            raise Stop(
                "runtime_error", "channel", f"invalid setup answer from the candidate: {str(frame)[:300]}"
            )
        raise Stop(str(status), reason[:40], str(frame.get("message", ""))[:4000])

    # -- one call ------------------------------------------------------------------------------------
    def _call(self, driver: Driver, shape: int, budget: Budget) -> Made:
        try:
            made = driver.call(shape, budget.left())
            self.window.calls += 1
            return made
        except RunnerTimeout:
            raise Stop(
                "timeout",
                budget.phase,
                f"the {budget.phase} phase ran past its {budget.seconds:g} s "
                "budget; the candidate's processes were killed",
            ) from None
        except RunnerDied as died:
            raise Stop(
                "runtime_error",
                "signal" if "killed" in died.how else "no_result",
                f"the candidate process {died.how} during the {budget.phase} phase",
            ) from None
        except ControlError as exc:
            raise Stop("runtime_error", "channel", f"invalid DONE from the candidate: {exc}") from None
        except ProblemFailure:
            raise

    def _judge(self, made: Made, checked: bool, phase: str) -> None:
        """Validate a call's answer; with ``checked``, compare its outputs with the reference. Its
        pristine inputs are let go as soon as it is judged (gigabytes, for large problems)."""
        assert self.driver is not None
        try:
            self._judge_call(made, checked, phase)
        finally:
            self.driver.release_last()

    def _judge_call(self, made: Made, checked: bool, phase: str) -> None:
        assert self.driver is not None
        self.calls += 1
        meta = made.outcome.meta
        if meta.get("ok") is not True:
            status, reason = meta.get("status"), meta.get("reason")
            if (status, reason) not in CALL_ERRORS:
                raise Stop("runtime_error", "channel", f"invalid DONE from the candidate: {str(meta)[:300]}")
            raise Stop(str(status), str(reason), str(meta.get("message", ""))[:2000])
        spec = self.problem.shapes[made.call.shape]
        if not checked:
            self._judge_published(made, False, phase, spec, [None] * len(spec.outputs))
            return
        # A checked call's outputs are read with the runner frozen, into memory of ours alone where
        # they are read from its memory: no thread of the candidate sees the read begin, and nothing
        # it maps changes, so a checked call looks like any other from inside until the read is over.
        runner = self.driver.runner
        in_place = spec.output_bytes >= self.s.compare_in_place_bytes
        shared = not self.driver.reads_privately
        with runner.held_still():
            try:
                self._timed("compare", lambda: self.driver.fetch(made))
            except OutputUnreadable as exc:
                raise Stop("runtime_error", "channel", f"invalid output description: {exc}") from None
            if in_place and shared:
                # Outputs of gigabytes in the shared region are compared where they lie, the runner
                # frozen meanwhile, rather than copied: a private copy of a 6 GB output is what the
                # 80 GB GPU did not have room for.
                self._judge_published(made, True, phase, spec, self.driver.checked_views(made.call.shape))
                return
            published = (
                self._timed("compare", self._snapshot_now(made.call.shape))
                if shared
                else self.driver.checked_views(made.call.shape)  # ours alone: nothing can change it
            )
        self._judge_published(made, True, phase, spec, published)

    def _snapshot_now(self, shape: int) -> Callable[[], list[torch.Tensor]]:
        """Our copy of the shared outputs, finished (a GPU copy is queued: it must be done before the
        runner is thawed, or a thread of it could change what we copy)."""

        def take() -> list[torch.Tensor]:
            assert self.driver is not None
            copy = self.driver.snapshot(shape)
            self.tools.sync()
            return copy

        return take

    def _judge_published(
        self, made: Made, checked: bool, phase: str, spec: Any, published: list[Any]
    ) -> None:
        assert self.driver is not None
        meta = made.outcome.meta
        try:
            cand = compare.validate_tree(meta.get("out"), published)
        except compare.ChannelError as exc:
            raise Stop("runtime_error", "channel", f"invalid output description: {exc}") from None
        where = f"{phase} call {self.calls}" + (
            f" on shape {spec.label}" if len(self.problem.shapes) > 1 else ""
        )
        flags = meta.get("flags")
        if isinstance(flags, list) and "output_in_harness_region" in flags:
            # Judged on every call, checked or not: the forward wrote into the harness's publish
            # buffer, which skips the copy that the baseline's bracket pays (outputs.py).
            raise Stop(
                "rejected",
                "output_in_harness_region",
                f"{where}: an output lies in the harness's own output region",
            )
        if not checked:
            bad = compare.check_structure(cand, spec.output_tree)
            if bad is not None:
                raise Stop(bad.status or "wrong_output", bad.reason or "type", f"{where}: {bad.message}")
            return
        self.checked += 1
        mutated = self.driver.mutated_inputs(made)
        if mutated:
            raise Stop(
                "rejected", "input_mutated", f"{where}: forward modified its input tensor(s) {mutated}"
            )
        if isinstance(flags, list) and "output_aliases_input" in flags:
            raise Stop("rejected", "output_aliases_input", f"{where}: an output shares storage with an input")
        native, ref64, note = self._timed("reference", lambda: self.problem.reference(made.call))
        check = self._timed(
            "compare",
            lambda: compare.check_trial(
                cand,
                compare.encode_reference(native),
                compare.encode_reference(ref64) if ref64 is not None else None,
                self.contract,
            ),
        )
        if not check.used_fp64 and "no_fp64_reference" not in self.flags:
            self.flags.append("no_fp64_reference")
            if note:
                self.findings.append(note)
        self.checks.append(check)
        if not check.ok:
            reason = check.reason or "tolerance"
            if phase != "correctness" and check.status == compare.WRONG:
                reason = "inconsistent"
            message = f"{where}: {check.message}{self._passed_before()}"
            raise Stop(check.status or compare.WRONG, reason, message)

    def _passed_before(self) -> str:
        """What a repair needs to know when earlier checked calls passed: the error comes and goes
        with the inputs or the timing, which points somewhere else than a wrong formula."""
        passed = sum(1 for c in self.checks[:-1] if c.ok)
        if not passed:
            return ""
        return (
            f" ({passed} checked call{'s' if passed > 1 else ''} before it passed on other fresh inputs: "
            "an error that comes and goes points at a race between threads, blocks or kernels, memory "
            "read before it is written, or state kept from one call to the next)"
        )

    def _alone(self, failure: BaseException) -> Stop:
        """A trusted step (inputs, the reference, our copies, the baseline's calls) failed while the
        candidate's processes lived. They end, the worker hands its cache back, and a whole call of
        every shape is tried without them: fresh inputs, the reference and, while its runner lives,
        the baseline. If that works the candidate took what the step needed (it held the device's
        memory, say) and gets the verdict; if not, the first failure stands (the problem's own, or
        the machine's), for the worker to report as before. Without this a candidate holding the
        GPU's memory made every retry of its evaluation fail as the machine's fault, until the pool
        took the only GPU out of service."""
        assert self.driver is not None
        self.driver.runner.close()
        self.driver.release_last()
        give_back_cached(self.problem.device)
        try:
            self.problem.trim()
            self.problem.reopen()  # a reference jail that died while the candidate lived starts again
            for shape in range(len(self.problem.shapes)):
                self.problem.reference(self.problem.new_call(shape))
                if self.baseline.runner.alive():
                    made = self.baseline.call(shape, self.s.timing_timeout_s)
                    self.baseline.release_last()
                    if made.outcome.meta.get("ok") is not True:
                        raise InfraError(f"the baseline runner failed alone: {made.outcome.meta}")
        except Exception:  # whatever it is, alone it fails too: the first failure stands
            self.baseline.release_last()
            raise failure from None
        return Stop(
            "runtime_error",
            "resource",
            f"a step of the evaluator failed while the candidate ran ({str(failure)[:600]}) and works "
            "without it: the candidate exhausted a shared resource (device memory, say)",
        )

    # -- phases --------------------------------------------------------------------------------------
    def _correctness(self) -> None:
        assert self.driver is not None
        budget = Budget("correctness", self.s.correctness_timeout_s)
        for shape in range(len(self.problem.shapes)):
            for _ in range(self.s.trials):
                self._judge(self._call(self.driver, shape, budget), True, "correctness")

    def _timing(self) -> list[dict[str, Any]]:
        budget = Budget("timing", self.s.timing_timeout_s)
        repeats = [s.label or "inputs" for s in self.problem.shapes if s.inputs_repeat]
        if repeats:
            # Fresh inputs on every call are what defeats memoization on input values; a problem
            # whose get_inputs() ignores the seed cannot give them, and no speedup on it is evidence.
            self.flags.append("inputs_repeat")
            self.findings.append(
                "inputs_repeat: get_inputs() returns the same values whatever the seed "
                f"({', '.join(repeats)}): every call sees the same inputs, so a candidate that "
                "caches outputs by input value looks fast without working; this speedup proves nothing"
            )
        shapes = [self._time_shape(shape, budget) for shape in range(len(self.problem.shapes))]
        if self.tools.cuda:
            assert self.driver is not None
            try:
                answer = self.driver.profile(0, budget.left(), meta=True)
            except (RunnerDied, RunnerTimeout, ControlError):
                answer = None
            if isinstance(answer, str):
                self.findings.append(f"no kernel profile: {answer}")
            if isinstance(answer, dict):
                self.kernels, self.launches = reported_kernels(answer)
        return shapes

    def _checked(self, forced: set[int], index: int) -> bool:
        return index in forced or self.rng.random() < self.s.check_rate

    def _time_shape(self, shape: int, budget: Budget) -> dict[str, Any]:
        assert self.driver is not None
        s = self.s
        cand, base = timing.Samples(), timing.Samples()
        # Warm-up, at least 3 calls and warmup_s, judged like every other call; longer while the
        # candidate's calls still compile or autotune Triton kernels (up to JIT_WARMUP_CALLS more).
        started, warm, jit_before = time.monotonic(), 0, None
        while True:
            made = self._call(self.driver, shape, budget)
            self._judge(made, self._checked(set(), -1), "timing")
            warm += 1
            jit_now = jit_count(made)
            compiling = jit_now is not None and jit_before is not None and jit_now != jit_before
            jit_before = jit_now
            elapsed = time.monotonic() - started
            if warm < 3 or (elapsed < s.warmup_s and elapsed < 8 * s.warmup_s):
                continue
            if not (compiling and warm < 3 + JIT_WARMUP_CALLS):
                break
        per_call_s = max(made.outcome.bracket_ns / 1e9, 1e-6)
        expected = int(min(max(3, s.max_time_s / per_call_s), s.min_calls))
        forced = set(self.rng.sample(range(expected), min(s.min_timed_checks, expected)))
        block = timing.block_size(per_call_s, expected, s.min_blocks)
        for _ in range(3):  # the baseline runner is warm; three calls settle its clocks
            self.baseline.call(shape, budget.left())
        self.window = CpuWindow()  # what ran before the timing loop is not counted
        spent = 0.0  # trusted seconds of the candidate's timed calls: GPU wall, or CPU time on the CPU
        index = 0
        while True:
            self._baseline_block(shape, block, base, budget, cand)
            cand.start_block()
            for _ in range(block):
                made = self._call(self.driver, shape, budget)
                checked = self._checked(forced, index)
                self._judge(made, checked, "timing")
                self.window.timed.append(len(cand.bracket_ms))
                cand.add(made.outcome.reported_ns, made.outcome.bracket_ns)
                spent += made.outcome.bracket_ns / 1e9
                self.timed += 1
                self.timed_checked += int(checked)
                index += 1
            n = len(cand.reported_ms)
            if n >= s.max_calls or (n >= s.min_calls and spent >= s.min_time_s):
                break
            if n >= 3 and spent >= s.max_time_s:
                break
        self._note_jit(shape, jit_before, jit_count(made))
        while self.timed_checked < min(s.min_timed_checks, index):  # slow kernels: top up the checks
            self._judge(self._call(self.driver, shape, budget), True, "timing")
            self.timed_checked += 1
        self._baseline_block(shape, block, base, budget, cand)
        self._note_hidden(shape)
        return self._figure(shape, cand, base)

    def _note_hidden(self, shape: int) -> None:
        hidden, calls = self.window.hidden_ns, self.window.charged_calls  # this shape's window
        if not calls:
            return
        self.hidden_shapes.add(shape)
        label = self.problem.shapes[shape].label
        prefix = f"{label}: " if len(self.problem.shapes) > 1 else ""
        self.findings.append(
            f"{prefix}hidden_cpu: the candidate's jail used {hidden / 1e6:.3g} ms of CPU that no live "
            f"process's clock showed (processes that ended between calls); charged to its timed calls "
            f"({hidden / 1e6 / calls:.3g} ms each)"
        )
        if "hidden_cpu" not in self.flags:
            self.flags.append("hidden_cpu")

    def _note_jit(self, shape: int, before: int | None, after: int | None) -> None:
        """Flag a candidate whose timed calls still compiled or autotuned Triton kernels."""
        if before is None or after is None or after <= before:
            return
        if "jit_in_timing" not in self.flags:
            self.flags.append("jit_in_timing")
        label = self.problem.shapes[shape].label
        self.findings.append(
            f"{label}: the candidate compiled or autotuned Triton kernels {after - before} time(s) during "
            "timed calls, after the warm-up; its times include that work (keep autotune keys and "
            "specializations the same from call to call)"
        )

    def _baseline_block(
        self,
        shape: int,
        calls: int,
        samples: timing.Samples,
        budget: Budget,
        cand: timing.Samples | None = None,
    ) -> None:
        """Baseline calls with the candidate frozen; on a GPU, first make sure it left nothing running.
        On the CPU, the candidate's jail is settled first: CPU time its calls' clocks did not see
        (processes that ended between two reads) is charged to its timed calls (``CpuWindow``)."""
        assert self.driver is not None
        runner = self.driver.runner
        frozen_cpu = runner.freeze()
        if cand is not None:
            self.window.settle(frozen_cpu, cand)
        self.baseline.runner.restart_charges()  # the candidate's next call is charged from its GO too
        try:
            if self.tools.gpu_busy():
                runner.close()
                time.sleep(0.5)
                if not self.tools.gpu_busy():
                    raise Stop(
                        "rejected",
                        "background_gpu_work",
                        "the candidate left GPU work running while it was frozen for the baseline's timing",
                    )
                raise DeviceBusy("the GPU is busy with work from another process")
            samples.start_block()
            for _ in range(calls):
                try:
                    made = self.baseline.call(shape, budget.left())
                except (RunnerDied, RunnerTimeout, ControlError) as exc:
                    raise InfraError(f"the baseline runner failed: {exc}") from None
                if made.outcome.meta.get("ok") is not True:
                    raise InfraError(f"the baseline runner failed: {made.outcome.meta}")
                samples.add(made.outcome.reported_ns, made.outcome.bracket_ns)
        finally:
            self.baseline.release_last()
            if runner.alive():
                runner.thaw()

    def _figure(self, shape: int, cand: timing.Samples, base: timing.Samples) -> dict[str, Any]:
        s = self.s
        fig = timing.bounded(
            cand,
            timing.overhead(base),
            s.abs_slack_ms,
            s.rel_slack,
            s.forged_gap_ms,
            believe_report=shape not in self.hidden_shapes,
            forged_gap_overheads=s.forged_gap_overheads,
        )
        label = self.problem.shapes[shape].label
        self.findings += [f"{label}: {f}" if len(self.problem.shapes) > 1 else f for f in fig.findings]
        if fig.forged:
            raise Stop(
                "rejected",
                "timing_forged",
                f"the candidate's process reported {fig.reported_ms:.4g} ms per "
                f"call while the trusted clock saw {fig.external_ms:.4g} ms: its timing was tampered with",
            )
        if fig.source == "external" and "timing_mismatch" not in self.flags:
            self.flags.append("timing_mismatch")
        return {
            "label": label,
            "samples_ms": fig.samples_ms,
            "baseline_ms": list(base.reported_ms),
            "reported_ms": fig.reported_ms,
            "external_ms": fig.external_ms,
            "overhead_ms": fig.overhead_ms,
            "source": fig.source,
            # every call's pair of numbers, for tools/ that study the bound (the parent ignores them)
            "raw": {
                "candidate": [cand.reported_ms, cand.bracket_ms],
                "baseline": [base.reported_ms, base.bracket_ms],
            },
        }


def candidate_setup(
    problem: LoadedProblem,
    driver: Driver,
    job: dict[str, Any],
    s: WorkerSettings,
    profiling: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The setup frame of a candidate's runner; ``profiling`` when an outside tool wraps it."""
    return {
        "mode": "candidate",
        "device": problem.device,
        "module_path": f"{job['job']}/candidate.py",
        "init_path": f"{job['job']}/init.pt",
        "shapes": driver.shapes_setup(),
        "timing": {"sleep_cycles": 0 if profiling else s.sleep_cycles, "spin_s": s.spin_s},
        "threads": s.cpu_threads,
        "poison": True,
        "env": job.get("env", {}),
        "sys_path": job.get("sys_path", []),
        "profiling": profiling,
    }


def load_budget(s: WorkerSettings, job: dict[str, Any]) -> float:
    return s.load_timeout_s + (s.build_timeout_s if job.get("deferred") else 0.0)


def out_of_memory(runner: RunnerHandle, stop: Stop) -> dict[str, Any] | None:
    """The verdict for a candidate that failed after its jail ran into its memory cap, whatever it
    failed with (killed, or an allocation error it raised): the cap covers what its processes hold in
    shared memory and tmpfs files, not only their resident sets. None if it did not."""
    jail = runner.jail
    if stop.status not in ("runtime_error", "load_error") or jail is None or not jail.oom_killed():
        return None
    cap = jail.memory_cap
    where = f"its jail's memory cap ({cap / (1 << 20):.0f} MiB)" if cap else "memory"
    return {
        "status": "runtime_error",
        "reason": "resource",
        "message": f"the candidate's processes ran out of {where}, counting what they hold in shared "
        f"memory and files as well as their own memory; {stop.message}"[:4000],
    }


def reported_kernels(answer: dict[str, Any]) -> tuple[list[list[Any]] | None, list[dict[str, Any]] | None]:
    """The kernel list and launches a runner's profiler reported, bounded and typed (still untrusted)."""
    listed = answer.get("kernels")
    kernels = (
        [
            [str(k[0])[:300], float(k[1])]
            for k in listed[:64]
            if isinstance(k, list) and len(k) == 2 and isinstance(k[1], (int, float))
        ]
        if isinstance(listed, list)
        else None
    )
    shown = answer.get("launches")
    launches = [x for x in shown[:64] if isinstance(x, dict)] if isinstance(shown, list) else None
    return kernels, launches


def jit_count(made: Made) -> int | None:
    """The Triton compilations and autotuning runs the candidate's process reported so far."""
    value = made.outcome.meta.get("jit")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
