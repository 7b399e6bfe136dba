"""How the speed of light reads in prompts, the leaderboard, ``show`` and tables. Pure."""

from __future__ import annotations

from stark_mcp.sol.model import Peaks, SolReport


def _ms(value: float) -> str:
    return f"{value:.3g} ms"


def rate(value: float, unit: str) -> str:
    """``4.3 TB/s``, ``9.7 GB/s``: the prefix that keeps the figure readable."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def peaks_text(peaks: Peaks) -> str:
    """e.g. ``4.3 TB/s, FP32 61 TFLOP/s, tensor 790 TFLOP/s (measured 2026-11-28T21:00:00Z)``."""
    parts = [rate(peaks.bandwidth_bytes_per_s, "B/s"), "FP32 " + rate(peaks.fp32_flops_per_s, "FLOP/s")]
    if peaks.tensor_flops_per_s:
        parts.append("tensor " + rate(peaks.tensor_flops_per_s, "FLOP/s"))
    when = f" {peaks.obtained_at}" if peaks.obtained_at else ""
    threads = f", {peaks.threads} thread" if peaks.threads else ""
    return ", ".join(parts) + f" ({peaks.source}{when}{threads})"


def fraction_text(report: SolReport | None) -> str:
    """A table cell: ``31%``, or ``-`` without a floor or a time."""
    if report is None or report.fraction is None:
        return "-"
    return f"{report.fraction:.0%}"


def roofline_name(report: SolReport) -> str:
    return {"memory": "memory roofline", "compute": "compute roofline"}.get(report.bound, "roofline")


def sol_sentence(report: SolReport, subject: str = "this attempt") -> str:
    """One line for a person or an agent: where the time stands, the floor, what bounds it."""
    floor = report.shapes[0].floor if len(report.shapes) == 1 else None
    split = (
        f" (memory {_ms(floor.memory_ms)}, compute {_ms(floor.compute_ms)})" if floor is not None else ""
    )
    base = f"the floor is {_ms(report.floor_ms)}{split}, {report.bound}-bound at {peaks_text(report.peaks)}"
    if report.fraction is None:
        return f"{base}."
    if report.below_floor:
        return (
            f"{subject} claims {report.fraction:.0%} of the {roofline_name(report)}, faster than writing its "
            f"outputs can be: impossible, rejected; {base}."
        )
    if report.beyond_roofline:
        return (
            f"{subject} is at {report.fraction:.0%} of the reference's {roofline_name(report)}: faster than "
            f"the reference's computation allows, so it computes something else (an algebraic rewrite or a "
            f"skipped term) — make sure it is exact for every input; {base}."
        )
    return (
        f"{subject} is at {report.fraction:.0%} of the {roofline_name(report)} "
        f"({report.headroom:.3g}x headroom); {base}."
    )
