"""The wire between the evaluator's parent and its trusted worker: every command and every answer as
a typed record, and the one place frames of that protocol are made and read.

A command is ``{"cmd": NAME, ...its fields}``, an answer (or event) ``{"kind": NAME, ...its
fields}``; both travel as ``common/frames.py`` frames. Each record's ``to_frame`` writes exactly its
fields (a field left at None is not written) and ``from_frame`` checks every field's presence and
type, refusing anything else with a ``WireError`` whose message says why: an unknown command or
answer (``UnknownFrame``), a missing, unexpected or mistyped field (``MalformedFrame``). How a record
becomes a frame and back is ``common/wire_codec.py``.

Commands (parent -> worker):
  LoadCommand       key, name, path, settings, hidden, visible -> Loaded | ProblemError
  EvaluateCommand   id, key, settings, job -> Progress* then Result | ProblemError
  BaselineCommand   key, name, settings -> Baseline | BaselineMissing
  ProfileCommand    key, settings, fallback, job (None: the reference) -> Profile
  SanitizeCommand   key, settings, job -> Sanitized
  SolCountsCommand  key -> SolCounts | SolMissing
  CalibrateCommand  -> Calibrated | SolMissing
  ShutdownCommand   (no answer: the worker closes its jails and exits)
Answers (worker -> parent); any command may instead get InfraError:
  Hello, Loaded, Progress, Result, Baseline, BaselineMissing, Profile, Sanitized, SolCounts,
  SolMissing, Calibrated, ProblemError, InfraError.
Shared records: WorkerSettings (what the worker needs of EvalSettings, built on the parent side by
``EvalSettings.worker_settings``) and Job (where a staged candidate's files are). Parts of answers
that the parent validates with its own schema stay JSON objects, typed here as TypedDicts (checked by
the codec, kept as dicts): ShapeTiming, CorrectnessSummary, BaselineShape, and the reference jail's
``reference_wire.ShapeCounts``.

Standard library only.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

from stark_mcp.evaluator.common.reference_wire import ShapeCounts
from stark_mcp.evaluator.common.wire_codec import MalformedFrame, Record, UnknownFrame
from stark_mcp.evaluator.common.wire_codec import WireError as WireError  # the protocol's errors' base

# How runners wait on a doorbell and what they launch first in a timed call; the worker's runners and
# the settings the parent sends (``EvalSettings.worker_settings``) both read them here.
# Spin this long before sleeping on a doorbell: wake-ups inside the bracket cost us.
GPU_SPIN_S = 0.005
# ~100 us of GPU sleep (at boost clock), launched first thing after GO: the runner's Python (views,
# launches, describing and publishing the outputs) then overlaps with device time, so the bracket
# measures the device, not the interpreter, and the forward's launch latency stays outside its events.
GPU_SLEEP_CYCLES = 200_000


# -- shared records ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerSettings:
    """What the trusted worker needs of ``EvalSettings`` for one device, built only by
    ``EvalSettings.worker_settings``: the timing tolerances of that device and how its runners wait
    are chosen there, so the worker holds no default of its own."""

    trials: int
    build_timeout_s: float
    load_timeout_s: float
    correctness_timeout_s: float
    timing_timeout_s: float
    baseline_timeout_s: float
    warmup_s: float
    min_calls: int
    min_time_s: float
    max_time_s: float
    max_calls: int
    cpu_threads: int
    check_rate: float
    min_timed_checks: int
    tolerance_factor: float
    tolerance_floor: float
    fallback_tolerance: float
    compare_in_place_bytes: int
    jail_memory_bytes: int
    profile_timeout_s: float
    profile_max_kernels: int
    sanitize_timeout_s: float
    # the device's timing tolerances (EvalSettings.gpu_timing or cpu_timing)
    abs_slack_ms: float
    rel_slack: float
    forged_gap_ms: float
    forged_gap_overheads: float
    min_blocks: int
    bracket_after_inputs: bool
    # how a runner waits on its doorbell and what it launches first (GPU_SPIN_S, GPU_SLEEP_CYCLES)
    spin_s: float
    sleep_cycles: int


@dataclass(frozen=True)
class Job:
    """A staged candidate: its source file, its build (if it has one) and how the worker uses it."""

    source_path: str
    build_dir: str | None
    deferred: bool  # the build finishes in the runner (its budget is added to the load's)
    build_in_place: bool  # the runner may use build_dir itself (no private copy)


class ShapeTiming(TypedDict):
    """One shape's figures in a Result (``Session._figure``; the parent's ``assemble._Shape``)."""

    label: str
    samples_ms: list[float]  # the figure of record, per timed call
    baseline_ms: list[float]  # the eager baseline's calls, timed alongside
    reported_ms: float | None  # median of what the candidate's process reported
    external_ms: float | None  # median of the trusted bracket, less the harness's share
    overhead_ms: float | None  # the harness's share of a bracket
    source: str  # "reported" (within the bound) or "external" (the bound replaced it)
    # every call's [reported_ms, bracket_ms], "candidate" and "baseline", for tools/ (the parent ignores it)
    raw: dict[str, list[list[float]]]


class CorrectnessSummary(TypedDict):
    """The checked calls, summed up (``compare.summarize``; the parent's ``CorrectnessReport``)."""

    trials: int
    trials_passed: int
    max_abs_error: float | None
    max_rel_error: float | None
    rel_norm_error: float | None  # the worst call's, relative to its tolerance
    tolerance: float | None
    allclose_1e2: bool | None
    allclose_1e4: bool | None


class BaselineShape(TypedDict):
    """One shape of a Baseline: every call's time, turned into stats by the parent."""

    label: str
    samples_ms: list[float]  # the baseline's own mode
    eager_ms: list[float]  # eager, timed alongside (the same list for the eager baseline)


# -- commands ------------------------------------------------------------------------------------------


class Command(Record):
    TAG: ClassVar[str] = "cmd"


@dataclass(frozen=True)
class LoadCommand(Command):
    NAME: ClassVar[str] = "load"
    key: str
    name: str
    path: str
    settings: WorkerSettings
    hidden: list[str]
    visible: list[str]


@dataclass(frozen=True)
class EvaluateCommand(Command):
    NAME: ClassVar[str] = "evaluate"
    id: str
    key: str
    settings: WorkerSettings
    job: Job


@dataclass(frozen=True)
class BaselineCommand(Command):
    NAME: ClassVar[str] = "baseline"
    key: str
    name: str
    settings: WorkerSettings


@dataclass(frozen=True)
class ProfileCommand(Command):
    NAME: ClassVar[str] = "profile"
    key: str
    settings: WorkerSettings
    fallback: bool  # the worker runs the torch profiler when Nsight Compute gives nothing
    job: Job | None = None  # None: profile the problem's reference


@dataclass(frozen=True)
class SanitizeCommand(Command):
    NAME: ClassVar[str] = "sanitize"
    key: str
    settings: WorkerSettings
    job: Job


@dataclass(frozen=True)
class SolCountsCommand(Command):
    NAME: ClassVar[str] = "sol_counts"
    key: str


@dataclass(frozen=True)
class CalibrateCommand(Command):
    NAME: ClassVar[str] = "calibrate"


@dataclass(frozen=True)
class ShutdownCommand(Command):
    NAME: ClassVar[str] = "shutdown"


COMMANDS: dict[str, type[Command]] = {
    c.NAME: c
    for c in (
        LoadCommand,
        EvaluateCommand,
        BaselineCommand,
        ProfileCommand,
        SanitizeCommand,
        SolCountsCommand,
        CalibrateCommand,
        ShutdownCommand,
    )
}


def decode_command(frame: dict[str, Any]) -> Command:  # free-form: a raw frame, decoded here
    """The command a frame holds, or a WireError saying why it holds none."""
    if not isinstance(frame, dict):
        raise MalformedFrame(f"a command must be an object, got {type(frame).__name__}")
    if "cmd" not in frame:
        raise MalformedFrame("a command frame has no 'cmd'")
    name = frame["cmd"]
    record = COMMANDS.get(name) if isinstance(name, str) else None
    if record is None:
        raise UnknownFrame(f"unknown command {name!r}; the worker knows {sorted(COMMANDS)}")
    return record.from_frame(frame)


# -- answers -------------------------------------------------------------------------------------------


class Answer(Record):
    TAG: ClassVar[str] = "kind"


@dataclass(frozen=True)
class Hello(Answer):
    """The worker's first frame, once torch and the device are up."""

    NAME: ClassVar[str] = "hello"
    device: str
    isolation: str
    isolation_note: str
    pid: int
    tools: dict[str, str | None]  # Nsight Compute and compute-sanitizer: where found, or None


@dataclass(frozen=True)
class Loaded(Answer):
    NAME: ClassVar[str] = "loaded"
    shapes: list[str]  # the labels of the problem's input shapes
    fp64: bool
    fp64_note: str


@dataclass(frozen=True)
class Progress(Answer):
    NAME: ClassVar[str] = "progress"
    id: str
    phase: str


@dataclass(frozen=True)
class Result(Answer):
    """A verdict. The parent validates its contents into ``assemble.WorkerResult`` (pydantic); the
    parts it reads there (the per-shape figures, the correctness summary, the candidate's own kernel
    list) stay JSON objects here: the worker's Session makes them, the parent's schema checks them."""

    NAME: ClassVar[str] = "result"
    id: str
    isolation: str
    isolation_note: str
    status: str
    reason: str | None = None
    message: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    shapes: list[ShapeTiming] = field(default_factory=list)
    correctness: CorrectnessSummary | None = None
    findings: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    kernels: list[list[Any]] | None = None  # [name, us] the candidate's own profiler reported
    # free-form: the candidate's own profiler's launches, untrusted and only bounded by the worker
    # (``runner_wire.Launch`` is what an honest runner sends); the parent shows them as they came
    launches: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Baseline(Answer):
    NAME: ClassVar[str] = "baseline"
    name: str
    mode: str
    shapes: list[BaselineShape]
    first_calls_s: float | None = None  # a compiled mode's compilation (eager has none)


@dataclass(frozen=True)
class BaselineMissing(Answer):
    NAME: ClassVar[str] = "baseline_missing"
    name: str
    message: str


@dataclass(frozen=True)
class Profile(Answer):
    NAME: ClassVar[str] = "profile"
    shape: str
    source: str  # ncu, torch_profiler or none
    reason: str
    seconds: float
    command: list[str] | None = None  # the Nsight Compute command line, when it was found
    report: str | None = None  # Nsight Compute's raw CSV (parsed on the parent side)
    kernels: list[list[Any]] | None = None  # the torch profiler's [name, us]
    # free-form: the torch profiler's launches as the (untrusted) runner said them, as in Result
    launches: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Sanitized(Answer):
    NAME: ClassVar[str] = "sanitized"
    report: str
    reason: str
    seconds: float


@dataclass(frozen=True)
class SolCounts(Answer):
    NAME: ClassVar[str] = "sol_counts"
    shapes: list[ShapeCounts]  # as the reference jail counted them (sol_floor.py checks each entry)


@dataclass(frozen=True)
class SolMissing(Answer):
    NAME: ClassVar[str] = "sol_missing"
    message: str


@dataclass(frozen=True)
class Calibrated(Answer):
    NAME: ClassVar[str] = "calibrated"
    bandwidth_bytes_per_s: float
    fp32_flops_per_s: float
    method: str
    seconds: float
    tensor_flops_per_s: float | None = None
    threads: int | None = None  # CPU: the threads measured
    cache_bytes: int | None = None  # CPU: the last-level cache


@dataclass(frozen=True)
class ProblemError(Answer):
    """The problem's own code failed (import, reference, shapes, sizing): never the candidate's."""

    NAME: ClassVar[str] = "problem_error"
    step: str
    message: str
    traceback: str
    id: str | None = None  # the evaluation's, when one was running


@dataclass(frozen=True)
class InfraError(Answer):
    """The worker could not serve the command (a malformed one included); the parent retries."""

    NAME: ClassVar[str] = "infra_error"
    message: str
    id: str | None = None
    traceback: str | None = None


ANSWERS: dict[str, type[Answer]] = {
    a.NAME: a
    for a in (
        Hello,
        Loaded,
        Progress,
        Result,
        Baseline,
        BaselineMissing,
        Profile,
        Sanitized,
        SolCounts,
        SolMissing,
        Calibrated,
        ProblemError,
        InfraError,
    )
}


def decode_answer(
    frame: dict[str, Any],  # free-form: a raw frame, decoded here
    expect: typing.Iterable[type[Answer]] | None = None,
) -> Answer:
    """The answer a frame holds (one of ``expect``, when given), or a WireError saying why not."""
    if not isinstance(frame, dict):
        raise MalformedFrame(f"an answer must be an object, got {type(frame).__name__}")
    if "kind" not in frame:
        raise MalformedFrame("an answer frame has no 'kind'")
    name = frame["kind"]
    allowed = ANSWERS if expect is None else {a.NAME: a for a in expect}
    record = allowed.get(name) if isinstance(name, str) else None
    if record is None:
        raise UnknownFrame(f"unknown answer {name!r}; expected one of {sorted(allowed)}")
    return record.from_frame(frame)
