"""Turning per-call measurements into the figure of record (pure; standard library only).

Each timed call gives two numbers: the time the runner reported (CUDA events or a CPU clock in its
own process: precise, but the candidate can rewrite it) and the bracket our worker measured around
the call (trustworthy, but it includes the harness's own share: the handshake, the publish, the
fence). That share is calibrated on the baseline runner, whose process runs only the problem's code
and the same harness, in the same window: ``overhead = median(bracket - reported)`` over its calls.

For the candidate, ``external = bracket - overhead`` is what the trusted clock saw. Its reported
median is used only when it is no lower than the external median minus a slack; otherwise the
external figure replaces it, with a finding. A reported median far below the bound is forgery, not
noise, and rejects the candidate.

The slack is what a shaved report can gain, so it is as small as the measurement allows, and it is
computed from trusted numbers only (the candidate could otherwise widen it by reporting noise):
a floor, a share of the external figure, and the statistical error of the two medians that the
comparison rests on, estimated from the spread of the baseline's per-call overhead. Calls are timed
in blocks, the two runners in turn, and a machine's speed drifts from block to block (a VM's CPU by
2x within 40 ms), so the error is also estimated from the spread of the baseline's block medians
(batch means), which sees that drift where the per-call spread does not; the larger one counts, up
to a cap: no spread however wide lets a report land more than ``NOISE_SLACK_CAP`` below the figure.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

# Reported below this share of the external figure (and past the slack) is forged. Not higher: a
# candidate that slows its own harness (hundreds of forked children make every page fault of its
# process dearer) is charged for it, but has not lied about its forward.
FORGED_RATIO = 0.4
Z = 4.0  # standard errors of the overhead estimate that a report may fall below the external figure
MEDIAN_SE = math.sqrt(math.pi / 2)  # standard error of a median = this x sigma / sqrt(n), for normal noise
MAD_SIGMA = 1.4826  # sigma = this x the median absolute deviation, for normal noise
MIN_BATCHES = 4  # block medians needed before their spread says anything
NOISE_SLACK_CAP = 0.25  # measured noise widens the slack to at most this share of the figure


def block_size(per_call_s: float, expected_calls: int, min_blocks: int = 1) -> int:
    """Calls per timing block: about 20 ms of them (at most 50), and few enough that the expected
    calls make ``min_blocks`` blocks. A CPU VM's speed drifts between blocks, and the slack needs
    that drift measured from enough block medians (``MIN_BATCHES``), not guessed. ``min_blocks`` 1
    (the GPU's) leaves blocks at 20 ms, however few the expected calls."""
    block = max(1, min(50, int(0.02 / max(per_call_s, 1e-9))))
    if min_blocks > 1:
        block = max(1, min(block, expected_calls // min_blocks))
    return block


@dataclass
class Samples:
    reported_ms: list[float] = field(default_factory=list)
    bracket_ms: list[float] = field(default_factory=list)
    block_starts: list[int] = field(default_factory=list)  # index of each timing block's first call

    def add(self, reported_ns: int, bracket_ns: int) -> None:
        self.reported_ms.append(reported_ns / 1e6)
        self.bracket_ms.append(bracket_ns / 1e6)

    def start_block(self) -> None:
        if not self.block_starts or self.block_starts[-1] != len(self.bracket_ms):
            self.block_starts.append(len(self.bracket_ms))

    def blocks(self, values: list[float]) -> list[list[float]]:
        """``values`` (one per call) cut at the block starts; empty blocks left out."""
        cuts = [i for i in self.block_starts if 0 < i < len(values)]
        edges = [0, *cuts, len(values)]
        return [values[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


@dataclass(frozen=True)
class Overhead:
    """The harness's share of a bracket, as the baseline's calls measured it."""

    median_ms: float
    sigma_ms: float  # per-call spread (robust), the noise of one bracket's overhead
    calls: int
    block_sigma_ms: float | None = None  # spread (robust) of the block medians: drift included
    blocks: int = 0


@dataclass
class Figure:
    samples_ms: list[float]
    reported_ms: float | None
    external_ms: float | None
    overhead_ms: float | None
    source: str  # "reported" (within the bound) or "external" (the bound replaced it)
    findings: list[str]
    forged: bool = False
    slack_ms: float | None = None


def overhead(baseline: Samples) -> Overhead | None:
    pairs = [b - r for r, b in zip(baseline.reported_ms, baseline.bracket_ms, strict=True)]
    if not pairs:
        return None
    middle = statistics.median(pairs)
    mad = statistics.median(abs(p - middle) for p in pairs)
    medians = [statistics.median(b) for b in baseline.blocks(pairs)]
    block_sigma = None
    if len(medians) >= MIN_BATCHES:
        centre = statistics.median(medians)
        block_sigma = MAD_SIGMA * statistics.median(abs(m - centre) for m in medians)
    return Overhead(middle, MAD_SIGMA * mad, len(pairs), block_sigma, len(medians))


def slack_ms(
    external: float, over: Overhead, calls: int, abs_slack_ms: float, rel_slack: float, blocks: int = 0
) -> float:
    """How far below the trusted figure an honest report may land: the larger of a floor, a share of
    the figure, and ``Z`` standard errors of (candidate median - baseline overhead median), the error
    taken per call or per block (``blocks``: the candidate's), whichever is larger, and capped."""
    noise = Z * MEDIAN_SE * over.sigma_ms * math.sqrt(1 / over.calls + 1 / max(calls, 1))
    if over.block_sigma_ms is not None and blocks >= MIN_BATCHES:
        drift = Z * MEDIAN_SE * over.block_sigma_ms * math.sqrt(1 / over.blocks + 1 / blocks)
        noise = max(noise, drift)
    return max(abs_slack_ms, rel_slack * external, min(noise, NOISE_SLACK_CAP * external))


def bounded(
    candidate: Samples,
    over: Overhead | None,
    abs_slack_ms: float,
    rel_slack: float,
    forged_gap_ms: float = 0.0,
    believe_report: bool = True,
    forged_gap_overheads: float = 0.0,
) -> Figure:
    """The figure of record. ``forged_gap_ms``: how far below the trusted figure a report must also
    land to be called forgery (the harness's honest differences, which the GPU has more of), and at
    least ``forged_gap_overheads`` times the harness's calibrated share of a call (on the CPU, two
    runners' harness shares can differ by a good part of it; a gap wider than the whole share is no
    harness difference).
    ``believe_report=False``: the trusted clock caught work the candidate's clocks cannot have seen
    (CPU time of processes that ended between calls), so its report gets no slack at all."""
    reported = statistics.median(candidate.reported_ms) if candidate.reported_ms else None
    if over is None or not candidate.bracket_ms or reported is None:
        return Figure(
            list(candidate.reported_ms),
            reported,
            None,
            over.median_ms if over is not None else None,
            "reported",
            ["no trusted bound: the baseline was not timed beside the candidate"],
        )
    external_samples = [max(b - over.median_ms, 0.0) for b in candidate.bracket_ms]
    external = statistics.median(external_samples)
    blocks = len(candidate.blocks(external_samples))
    slack = slack_ms(external, over, len(external_samples), abs_slack_ms, rel_slack, blocks)
    if believe_report and reported >= external - slack:
        return Figure(
            list(candidate.reported_ms), reported, external, over.median_ms, "reported", [], False, slack
        )
    finding = (
        f"timing_mismatch: the candidate's process reported {reported:.4g} ms per call, the trusted clock "
        f"saw {external:.4g} ms (slack {slack:.3g} ms); the trusted figure is used"
    )
    # Past the slack the report has lost the benefit of the doubt: the figure is the trusted clock's
    # alone. So a report can gain at most the slack (by landing just inside it), never more.
    floor = max(forged_gap_ms, forged_gap_overheads * over.median_ms)
    forged = reported < FORGED_RATIO * external and external - reported > floor
    return Figure(external_samples, reported, external, over.median_ms, "external", [finding], forged, slack)
