"""Profiles as records: the worker's profile answer, or the evaluation's own kernel list, to a
``records.ProfileReport`` (parent side).

Nothing here raises: a profile that cannot be read becomes a report with ``source="none"`` and the
reason, because a profile is feedback for the planner, never a condition of a verdict.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from stark_mcp.evaluator.common.profile_parse import ProfileParseError, kernels_from_ncu, kernels_from_torch
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.records import ProfileReport

NO_COUNTERS = "the torch profiler's kernel list (names, device times, launch shapes); no hardware counters"


def unavailable(reason: str, seconds: float = 0.0, shape: str = "") -> ProfileReport:
    return ProfileReport(source="none", reason=reason[:2000], seconds=round(seconds, 3), shape=shape)


def from_answer(
    answer: dict[str, Any],  # free-form: the answer's frame, read tolerating any gap
    source: str | Candidate | None,
    launch_limit: int,
    seconds: float,
) -> ProfileReport:
    """The worker's ``profile`` answer: Nsight Compute's report, the torch profiler's list, or why
    there is neither. ``source`` (the candidate's code; None for the reference) marks own kernels."""
    shape = str(answer.get("shape", ""))[:200]
    reason = str(answer.get("reason", ""))[:2000]
    kind = answer.get("source")
    try:
        if kind == "ncu":
            parsed = kernels_from_ncu(str(answer.get("report", "")))
            notes = [m for m in parsed["messages"] if "unmodified GPU clocks" not in m][:5]
            truncated = sum(k["launches"] for k in parsed["kernels"]) >= launch_limit
            if truncated:
                notes.append(f"only the first {launch_limit} kernel launches of the forward were profiled")
            report = ProfileReport(
                source="ncu",
                reason=reason,
                device_name=parsed["device_name"],
                shape=shape,
                kernels=parsed["kernels"],
                total_time_us=parsed["total_time_us"],
                truncated=truncated,
                seconds=round(seconds, 3),
                notes=notes,
            )
        elif kind == "torch_profiler":
            listed = answer.get("launches") or answer.get("kernels") or []
            report = from_kernels(listed, reason, shape, seconds)
        else:
            return unavailable(reason or "no profile was taken", seconds, shape)
    except (ProfileParseError, ValidationError, TypeError, ValueError, KeyError) as exc:
        return unavailable(f"the profile could not be read: {str(exc)[:500]}", seconds, shape)
    return mark_own(report, source)


def from_kernels(kernels: list[Any], reason: str, shape: str = "", seconds: float = 0.0) -> ProfileReport:
    """The fallback: the torch profiler's launches (with shapes) or ``[name, us]`` pairs."""
    parsed = kernels_from_torch(kernels)
    if not parsed["kernels"]:
        said = (reason + "; " if reason else "") + "the torch profiler saw no kernel"
        return unavailable(said, seconds, shape)
    return ProfileReport(
        source="torch_profiler",
        reason=reason,
        shape=shape,
        kernels=parsed["kernels"],
        total_time_us=parsed["total_time_us"],
        seconds=round(seconds, 3),
        notes=[NO_COUNTERS],
    )


def mark_own(report: ProfileReport, source: str | Candidate | None) -> ProfileReport:
    """Say which kernels the candidate's source defines (None for the reference: none are)."""
    own = Candidate.of(source).own_kernels if source is not None else frozenset()
    kernels = [k.model_copy(update={"own": k.short_name in own}) for k in report.kernels]
    return report.model_copy(update={"kernels": kernels})
