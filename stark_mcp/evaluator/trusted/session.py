"""One candidate's evaluation inside the trusted worker: start its runner, check it, time it beside
the baseline, and write the result (a ``SessionResult``; the parent validates it into an ``Evaluation``).

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

``Session`` is cut along what it does, one part a module: the state and the one-call step its parts
share, with the verdict exceptions and records (``session_state.py``), judging a call
(``session_judging.py``), the timing phase (``session_timing.py``); the runner's frames are
``candidate_frames.py`` and the CPU window ``cpu_window.py``. Here: the load, the correctness phase,
the retry of a failed trusted step without the candidate, and the result.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable
from typing import Any

from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.trusted import compare
from stark_mcp.evaluator.trusted.candidate_frames import Staged, candidate_setup, load_budget
from stark_mcp.evaluator.trusted.cpu_window import CpuWindow
from stark_mcp.evaluator.trusted.driver import DeviceTools, Driver, give_back_cached
from stark_mcp.evaluator.trusted.problem import LoadedProblem
from stark_mcp.evaluator.trusted.runners import RunnerDied, RunnerHandle, RunnerTimeout
from stark_mcp.evaluator.trusted.session_state import (
    CANDIDATE_STATUSES,
    TRUSTED_FAILURES,
    Budget,
    DeviceBusy,
    InfraError,
    SessionResult,
    Stop,
    Verdict,
)
from stark_mcp.evaluator.trusted.session_timing import ShapeTiming

__all__ = ["InfraError", "Session", "Stop", "out_of_memory"]


class Session(ShapeTiming):
    """One evaluation: its parts joined (judging a call, the timing phase), the load, the correctness
    phase and the result."""

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
        self.kernels: list[list[Any]] | None = None  # reported by the candidate's own profiler
        self.launches: list[dict[str, Any]] | None = None  # free-form: the same, per launch, as it said
        self.rng = random.Random(secrets.randbits(64))
        self.window = CpuWindow()  # CPU: the candidate jail's whole CPU time between two freezes
        self.hidden_shapes: set[int] = set()  # shapes whose calls did work the jail's live clocks missed

    def run(self, runner: RunnerHandle, job: Staged) -> SessionResult:
        """Evaluate with ``runner`` (started, waiting for its setup); ``job`` says where its files are."""
        result: SessionResult
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

    # -- load ----------------------------------------------------------------------------------------
    def _load(self, runner: RunnerHandle, job: Staged) -> None:
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


def out_of_memory(runner: RunnerHandle, stop: Stop) -> Verdict | None:
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
