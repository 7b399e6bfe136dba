"""The timing phase of a candidate's evaluation (``ShapeTiming``): per shape, warm-up calls, then
blocks of baseline calls (the candidate frozen) and candidate calls until the timing budget is spent,
a secret random subset of the candidate's calls checked; then the figure of record, bounded by our
bracket minus the overhead calibrated on the baseline (``timing.py``). A part of ``Session``;
standard library and torch only.
"""

from __future__ import annotations

import time

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.control import ControlError
from stark_mcp.evaluator.trusted import timing
from stark_mcp.evaluator.trusted.candidate_frames import jit_count, reported_kernels
from stark_mcp.evaluator.trusted.cpu_window import CpuWindow
from stark_mcp.evaluator.trusted.runners import RunnerDied, RunnerTimeout
from stark_mcp.evaluator.trusted.session_judging import CallJudging
from stark_mcp.evaluator.trusted.session_state import Budget, DeviceBusy, InfraError, Stop

JIT_WARMUP_CALLS = 20  # extra warm-up calls at most while a shape's calls still compile or autotune


class ShapeTiming(CallJudging):
    """The timing phase: every shape timed beside the baseline, then the candidate's own profile."""

    def _timing(self) -> list[wire.ShapeTiming]:
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

    def _time_shape(self, shape: int, budget: Budget) -> wire.ShapeTiming:
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

    def _figure(self, shape: int, cand: timing.Samples, base: timing.Samples) -> wire.ShapeTiming:
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
