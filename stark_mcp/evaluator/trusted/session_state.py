"""What every part of a candidate's evaluation (``session.py``) shares: how it ends early (``Stop``
with a verdict, ``InfraError`` for the machine's failures), the phase budgets, the records it writes,
and ``SessionBase``, the state and the one-call step its parts (``session_judging.py``,
``session_timing.py``) work on. Standard library and torch only.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import torch

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.control import ControlError
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.trusted import compare
from stark_mcp.evaluator.trusted.cpu_window import CpuWindow
from stark_mcp.evaluator.trusted.driver import DeviceTools, Driver, Made
from stark_mcp.evaluator.trusted.problem import LoadedProblem, ProblemFailure, ResourceExhausted
from stark_mcp.evaluator.trusted.runners import RunnerDied, RunnerTimeout

CANDIDATE_STATUSES = {"build_error", "load_error", "runtime_error", "rejected"}
CALL_ERRORS = {("runtime_error", "exception"), ("rejected", "tamper")}


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


class Verdict(TypedDict):
    status: str
    reason: str | None
    message: str


class SessionResult(Verdict, total=False):
    """What ``Session.run`` returns: the verdict and the fields of ``wire.Result`` beside it."""

    shapes: list[wire.ShapeTiming]
    logs: dict[str, str]
    kernels: list[list[Any]] | None  # [name, us] as the candidate's own profiler said (information)
    # free-form: each launch as the candidate's own profiler said it, bounded but not read here
    launches: list[dict[str, Any]] | None
    correctness: wire.CorrectnessSummary | None  # compare.summarize of the checked calls
    findings: list[str]
    flags: list[str]
    phase_seconds: dict[str, float]
    counts: dict[str, int]


class SessionBase:
    """The state of one evaluation that its parts share, and the step they all take: one call."""

    problem: LoadedProblem
    baseline: Driver
    tools: DeviceTools
    s: WorkerSettings
    emit: Callable[[str], None]
    contract: compare.Contract
    checks: list[compare.TrialCheck]
    findings: list[str]
    flags: list[str]
    phase_seconds: dict[str, float]
    parts: dict[str, float]  # inputs, reference, compare: seconds inside other phases
    calls: int
    checked: int
    timed: int
    timed_checked: int
    driver: Driver | None
    kernels: list[list[Any]] | None  # reported by the candidate's own profiler: information only
    launches: list[dict[str, Any]] | None  # free-form: the same, per launch with its shape
    rng: random.Random
    window: CpuWindow  # CPU: the candidate jail's whole CPU time between two freezes
    hidden_shapes: set[int]  # shapes whose calls did work the jail's live clocks missed

    def _timed(self, part: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        try:
            return fn()
        finally:
            self.parts[part] = self.parts.get(part, 0.0) + time.monotonic() - started

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
