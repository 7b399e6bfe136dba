"""From the trusted worker's answer to an ``Evaluation`` record (pure).

The worker is trusted code, but its answer still crosses a process boundary: it is validated here
into typed records, and anything off-schema is an ``EvaluatorError`` (an infrastructure fault), never a
verdict against the candidate. Several shapes aggregate by geometric mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.own_kernels import kernel_share
from stark_mcp.evaluator.host.timing_stats import timing_stats
from stark_mcp.records import (
    CorrectnessReport,
    Dependencies,
    Evaluation,
    ShapeResult,
    Status,
    TimingStats,
    TrustReport,
)


class _Shape(BaseModel):
    label: str
    samples_ms: list[float]
    baseline_ms: list[float] = Field(default_factory=list)
    reported_ms: float | None = None
    external_ms: float | None = None
    overhead_ms: float | None = None
    source: str = "reported"


class _Counts(BaseModel):
    calls: int = 0
    checked_calls: int = 0
    timed_calls: int = 0
    timed_checked: int = 0


class WorkerResult(BaseModel):
    status: Status
    reason: str | None = None
    message: str = ""
    logs: dict[str, str] = Field(default_factory=dict)
    shapes: list[_Shape] = Field(default_factory=list)
    correctness: CorrectnessReport | None = None
    findings: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    counts: _Counts = Field(default_factory=_Counts)
    isolation: str = ""
    isolation_note: str = ""
    kernels: list[tuple[str, float]] | None = None
    # the same profile per launch, with launch shapes; free-form: common/profile_parse's launch
    # records, which profile_reports.from_kernels reads tolerating any gap
    launches: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class EvaluationOrigin:
    """What every ``Evaluation`` of one candidate on one device carries, whatever its verdict: the
    device, the hashes of the two texts and the settings, and what else the verdict depends on."""

    device: str
    device_name: str
    problem_hash: str
    source_hash: str
    settings_hash: str
    dependencies: Dependencies

    def fields(self) -> dict[str, object]:
        """As ``Evaluation`` fields (for its constructor or ``model_copy``'s update)."""
        return {
            "device": self.device,
            "device_name": self.device_name,
            "problem_hash": self.problem_hash,
            "source_hash": self.source_hash,
            "settings_hash": self.settings_hash,
            "dependencies": self.dependencies,
        }


DEFENCES = [
    "candidate in its own jail ({isolation})",
    "reference model only in the trusted worker",
    "fresh secret inputs written just before each call",
    "outputs compared in the trusted worker on {checked} calls ({timed_checked} secretly chosen timed calls)",
    "time bounded by the trusted {clock}",
    "eager baseline re-timed side by side, candidate frozen meanwhile",
]
# own_kernel_share comes from a profile the candidate's own process took: information, never a defence.


def parse(frame: dict[str, Any]) -> WorkerResult:  # free-form: the answer's frame, validated here
    try:
        return WorkerResult.model_validate(frame)
    except ValidationError as exc:
        raise EvaluatorError(f"the evaluator's worker sent an invalid result: {exc.errors()[0]}") from None


def geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def aggregate(stats: list[TimingStats]) -> TimingStats:
    """One shape: itself. Several: geometric means, the IQR as the mean relative spread."""
    if len(stats) == 1:
        return stats[0]
    median = geomean([s.median_ms for s in stats])
    spread = geomean([max(s.iqr_ms, 1e-12) / s.median_ms for s in stats if s.median_ms > 0])
    return TimingStats(
        median_ms=median,
        iqr_ms=median * spread if math.isfinite(spread) else 0.0,
        mean_ms=geomean([s.mean_ms for s in stats]),
        min_ms=geomean([s.min_ms for s in stats]),
        max_ms=geomean([s.max_ms for s in stats]),
        samples=sum(s.samples for s in stats),
    )


def evaluation(
    result: WorkerResult,
    device: str,
    extra_baselines: dict[str, dict[str, TimingStats]],
    origin: EvaluationOrigin,
    source: str | Candidate = "",
    min_share: float = 0.0,
) -> Evaluation:
    """``extra_baselines``: name -> shape label -> stats, from the validated baseline cache."""
    shapes: list[ShapeResult] = []
    runtime = None
    for shape in result.shapes:
        stats = timing_stats(shape.samples_ms)
        baselines: dict[str, TimingStats] = {}
        if shape.baseline_ms:
            baselines["eager"] = timing_stats(shape.baseline_ms)
        for name, per_shape in extra_baselines.items():
            if shape.label in per_shape:
                baselines[name] = per_shape[shape.label]
        speedups = {n: b.median_ms / stats.median_ms for n, b in baselines.items() if stats.median_ms > 0}
        shapes.append(ShapeResult(label=shape.label, runtime=stats, baselines=baselines, speedups=speedups))
    speedups: dict[str, float] = {}
    baselines_agg: dict[str, TimingStats] = {}
    if shapes:
        runtime = aggregate([s.runtime for s in shapes if s.runtime is not None])
        names = set.intersection(*(set(s.baselines) for s in shapes))
        for name in sorted(names):
            baselines_agg[name] = aggregate([s.baselines[name] for s in shapes])
            speedups[name] = geomean([s.speedups[name] for s in shapes])
    share = kernel_share(result.kernels, Candidate.of(source).own_kernels) if result.kernels else None
    flags = list(result.flags)
    if share is not None and share < min_share:
        flags.append("low_own_kernel_share")
    clock = "GPU wall clock and fence" if device == "cuda" else "CPU time accounted to the jail"
    counts = result.counts
    reported = [s.reported_ms for s in result.shapes if s.reported_ms]
    external = [s.external_ms for s in result.shapes if s.external_ms]
    overhead = [s.overhead_ms for s in result.shapes if s.overhead_ms]
    trust = TrustReport(
        isolation=result.isolation,
        isolation_note=result.isolation_note,
        calls=counts.calls,
        checked_calls=counts.checked_calls,
        timed_calls=counts.timed_calls,
        timed_checked=counts.timed_checked,
        reported_ms=geomean(reported) if reported else None,
        external_ms=geomean(external) if external else None,
        overhead_ms=geomean(overhead) if overhead else None,
        baseline_side_by_side=bool(result.shapes and all(s.baseline_ms for s in result.shapes)),
        own_kernel_share=share,
        defences=[
            d.format(
                isolation=result.isolation or "?",
                checked=counts.checked_calls,
                timed_checked=counts.timed_checked,
                clock=clock,
            )
            for d in DEFENCES
        ],
        findings=list(result.findings),
    )
    return Evaluation(
        status=result.status,
        reason=result.reason,
        message=result.message,
        logs=result.logs,
        runtime=runtime,
        baselines=baselines_agg,
        speedups=speedups,
        flags=flags,
        correctness=result.correctness,
        own_kernel_share=share,
        shapes=shapes,
        trust=trust,
        phase_seconds=dict(result.phase_seconds),
        **origin.fields(),
    )


def with_baselines(
    evaluation: Evaluation, per_shape: dict[str, dict[str, TimingStats]]
) -> Evaluation | None:
    """``evaluation`` with the speedups over baselines timed after it (name -> shape label ->
    stats), or None when it gains none: it did not pass, already has them, or lacks a shape."""
    if not evaluation.passed or not evaluation.shapes:
        return None
    new = [n for n, shapes in per_shape.items() if n not in evaluation.baselines and shapes]
    if not new or any(s.runtime is None for s in evaluation.shapes):
        return None
    shapes = []
    for shape in evaluation.shapes:
        assert shape.runtime is not None
        baselines, speedups = dict(shape.baselines), dict(shape.speedups)
        for name in new:
            stats = per_shape[name].get(shape.label)
            if stats is not None and shape.runtime.median_ms > 0:
                baselines[name] = stats
                speedups[name] = stats.median_ms / shape.runtime.median_ms
        shapes.append(shape.model_copy(update={"baselines": baselines, "speedups": speedups}))
    baselines_agg, speedups_agg = dict(evaluation.baselines), dict(evaluation.speedups)
    for name in new:
        if all(name in s.speedups for s in shapes):
            baselines_agg[name] = aggregate([s.baselines[name] for s in shapes])
            speedups_agg[name] = geomean([s.speedups[name] for s in shapes])
    if baselines_agg == evaluation.baselines:
        return None
    filled = {f"baseline_{kind}:{n}" for n in baselines_agg for kind in ("pending", "missing")}
    flags = [f for f in evaluation.flags if f not in filled]
    return evaluation.model_copy(
        update={"shapes": shapes, "baselines": baselines_agg, "speedups": speedups_agg, "flags": flags}
    )
