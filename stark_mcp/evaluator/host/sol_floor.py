"""The speed-of-light step of an evaluation (parent side): the problem's counts and the device's
peaks, each asked of a trusted worker once and kept on disk, then the floor check on the verdict.

A figure of record below what writing the outputs costs is impossible: ``rejected`` with reason
``below_physical_floor``, whatever the rest says. One below the reference's roofline is possible only
by changing the computation: flagged ``beyond_reference_roofline`` for a reader, never rejected.
The math is ``stark_mcp.sol.roofline`` (pure); see docs/sol.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.problems import Problem
from stark_mcp.records import Evaluation, Status
from stark_mcp.sol.calibration import CountsCache, PeaksCache, Signer
from stark_mcp.sol.model import Peaks, SolReport
from stark_mcp.sol.roofline import below_floor_message, sol_report

log = logging.getLogger(__name__)
BELOW_FLOOR = "below_physical_floor"
BEYOND_ROOFLINE = "beyond_reference_roofline"
COUNT_TIMEOUT_S = 600.0
CALIBRATE_TIMEOUT_S = 300.0
_COUNT_KEYS = {"label": str, "input_bytes": int, "param_bytes": int, "output_bytes": int}
# free-form: one shape's counts in the format stark_mcp.sol owns (roofline.shape_floor, CountsCache),
# checked field by field in _valid_counts
ShapeCounts = dict[str, Any]

# (command, expected answers, timeout) -> the worker's answer, on a worker of the device's pool
Ask = Callable[[wire.Command, set[type[wire.Answer]], float], Awaitable[wire.Answer]]


def _valid_counts(shapes: object) -> list[ShapeCounts]:
    """The worker is trusted, but its answer crosses a process boundary: check its shape."""
    if not isinstance(shapes, list) or not shapes:
        raise ValueError("no shapes")
    out = []
    for entry in shapes:
        if not isinstance(entry, dict):
            raise ValueError("a shape is not an object")
        clean = {k: kind(entry[k]) for k, kind in _COUNT_KEYS.items()}
        clean["flops"] = {str(k): float(v) for k, v in dict(entry.get("flops", {})).items()}
        clean["flops_by_op"] = {str(k): float(v) for k, v in dict(entry.get("flops_by_op", {})).items()}
        clean["dtypes"] = [str(d) for d in entry.get("dtypes", [])]
        clean["counted_on"] = str(entry.get("counted_on", "device"))
        out.append(clean)
    return out


def shape_times(evaluation: Evaluation, labels: list[str]) -> dict[str, float]:
    """The figure of record per input set: each shape's median (the one runtime with one shape)."""
    times = {s.label: s.runtime.median_ms for s in evaluation.shapes if s.runtime is not None}
    if not times and evaluation.runtime is not None and len(labels) == 1:
        times = {labels[0]: evaluation.runtime.median_ms}
    return times


def judged(evaluation: Evaluation, report: SolReport) -> Evaluation:
    """The evaluation with its SOL record, and the floor check applied to its verdict."""
    update: dict[str, object] = {"sol": report}  # model_copy's: Evaluation field -> value
    if evaluation.passed and report.below_floor:
        update.update(
            status=Status.REJECTED,
            reason=BELOW_FLOOR,
            message=f"impossible time: {below_floor_message(report)}",
            flags=[*evaluation.flags, BELOW_FLOOR],
        )
    elif evaluation.passed and report.beyond_roofline:
        update["flags"] = [*evaluation.flags, BEYOND_ROOFLINE]
    return evaluation.model_copy(update=update)


def peaks_version(torch_version: str, stack: str) -> str:
    """What the peaks cache is keyed by besides the device name."""
    return f"{torch_version}-{stack}" if stack else torch_version


class SolFloors:
    """Counts per problem and peaks per device, cached under ``root`` and in memory."""

    def __init__(self, root: Path, signer: Signer | None = None) -> None:
        self.counts_cache = CountsCache(root, signer)
        self.peaks_cache = PeaksCache(root, signer)
        self._locks: dict[str, asyncio.Lock] = {}
        self._peaks: dict[str, Peaks | None] = {}

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    async def counts(self, problem: Problem, ask: Ask, stack: str = "") -> list[ShapeCounts] | None:
        """``stack``: ``verdict_dependencies.stack_tag`` of the evaluation (the counting code, torch, the
        user's files the reference imports): counts made under another are counted again."""
        async with self._lock(f"counts:{problem.hash}:{stack}"):
            cached = await asyncio.to_thread(self.counts_cache.load, problem.hash, stack)
            if cached is not None:
                return cached
            answer = await ask(
                wire.SolCountsCommand(key=problem.hash), {wire.SolCounts, wire.SolMissing}, COUNT_TIMEOUT_S
            )
            if not isinstance(answer, wire.SolCounts):
                log.warning("%s: no floor: %s", problem.name, getattr(answer, "message", None))
                return None
            shapes = _valid_counts(answer.shapes)
            await asyncio.to_thread(self.counts_cache.store, problem.hash, shapes, stack)
            return shapes

    async def peaks(self, info: DeviceInfo, ask: Ask, stack: str = "") -> Peaks | None:
        """``stack``: keys the measured peaks besides the device name and torch (the driver, CUDA,
        the calibration code)."""
        held = f"{info.name}:{stack}"
        if held in self._peaks:
            return self._peaks[held]
        async with self._lock(f"peaks:{held}"):
            if held not in self._peaks:

                async def measure() -> dict[str, Any]:  # free-form: read by peaks_from_measurement
                    answer = await ask(
                        wire.CalibrateCommand(), {wire.Calibrated, wire.SolMissing}, CALIBRATE_TIMEOUT_S
                    )
                    if not isinstance(answer, wire.Calibrated):
                        raise RuntimeError(getattr(answer, "message", "calibration failed"))
                    return answer.to_frame()  # the figures, as peaks_from_measurement reads them

                self._peaks[held] = await self.peaks_cache.get(
                    info.name, info.kind, peaks_version(info.torch_version, stack), measure,
                    cache_bytes=info.l2_bytes or 0,
                )  # fmt: skip
            return self._peaks[held]

    async def judge(
        self, problem: Problem, info: DeviceInfo, evaluation: Evaluation, ask: Ask, stack: str = ""
    ) -> Evaluation:
        """``evaluation`` with its SOL record and floor check; unchanged when there is no floor
        (a problem whose forward cannot be counted, a device neither measured nor published).
        ``stack``: ``verdict_dependencies.stack_tag`` of the evaluation, which keys both caches."""
        try:
            counts = await self.counts(problem, ask, stack)
            peaks = await self.peaks(info, ask, stack) if counts else None
            if not counts or peaks is None:
                return evaluation
            labels = [str(c["label"]) for c in counts]
            report = sol_report(counts, peaks, shape_times(evaluation, labels))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("%s: no floor: %s", problem.name, exc)
            return evaluation
        return judged(evaluation, report)
