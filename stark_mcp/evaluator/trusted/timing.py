"""Turning per-call measurements into the figure of record (pure; standard library only).

Each timed call gives two numbers: the time the runner reported (CUDA events or a perf counter in
its own process: precise, but the candidate can rewrite it) and the bracket our worker measured
around the call (trustworthy, but it includes a fixed overhead: the handshake, the input write, the
L2 flush, the fence). The overhead is calibrated on the baseline runner, whose process runs only the
problem's code and the same harness, in the same window: ``overhead = median(bracket - reported)``.

For the candidate, ``external = bracket - overhead`` bounds what it can claim: its reported median
is used when it is no lower than the external median minus a slack (noise of the bracket), and the
external figures are used otherwise, with a finding. A reported median far below the bound is
forgery, not noise, and rejects the candidate.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

FORGED_RATIO = 0.6  # reported below this share of the external figure (and past 2 slacks) is forged


@dataclass
class Samples:
    reported_ms: list[float] = field(default_factory=list)
    bracket_ms: list[float] = field(default_factory=list)

    def add(self, reported_ns: int, bracket_ns: int) -> None:
        self.reported_ms.append(reported_ns / 1e6)
        self.bracket_ms.append(bracket_ns / 1e6)


@dataclass
class Figure:
    samples_ms: list[float]
    reported_ms: float | None
    external_ms: float | None
    overhead_ms: float | None
    source: str  # "reported" (within the bound) or "external" (the bound replaced it)
    findings: list[str]
    forged: bool = False


def overhead_ms(baseline: Samples) -> float | None:
    pairs = [b - r for r, b in zip(baseline.reported_ms, baseline.bracket_ms, strict=True)]
    return statistics.median(pairs) if pairs else None


def slack_ms(external: float, abs_slack_ms: float, rel_slack: float) -> float:
    return max(abs_slack_ms, rel_slack * external)


def bounded(candidate: Samples, overhead: float | None, abs_slack_ms: float, rel_slack: float) -> Figure:
    reported = statistics.median(candidate.reported_ms) if candidate.reported_ms else None
    if overhead is None or not candidate.bracket_ms or reported is None:
        return Figure(
            list(candidate.reported_ms),
            reported,
            None,
            overhead,
            "reported",
            ["no trusted bound: the baseline was not timed beside the candidate"],
        )
    external_samples = [max(b - overhead, 0.0) for b in candidate.bracket_ms]
    external = statistics.median(external_samples)
    slack = slack_ms(external, abs_slack_ms, rel_slack)
    if reported >= external - slack:
        return Figure(list(candidate.reported_ms), reported, external, overhead, "reported", [])
    finding = (
        f"timing_mismatch: the candidate's process reported {reported:.4g} ms per call, the trusted clock "
        f"saw {external:.4g} ms (slack {slack:.3g} ms); the trusted figure is used"
    )
    forged = reported < FORGED_RATIO * external and external - reported > 2 * slack
    return Figure(external_samples, reported, external, overhead, "external", [finding], forged)
