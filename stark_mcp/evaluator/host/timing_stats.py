"""Summary statistics of per-call times (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from stark_mcp.records import TimingStats


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of already sorted values."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def timing_stats(samples_ms: Sequence[float]) -> TimingStats:
    values = sorted(float(s) for s in samples_ms)
    if not values or any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError("timing samples must be a non-empty list of finite non-negative numbers")
    return TimingStats(
        median_ms=quantile(values, 0.5),
        iqr_ms=quantile(values, 0.75) - quantile(values, 0.25),
        mean_ms=sum(values) / len(values),
        min_ms=values[0],
        max_ms=values[-1],
        samples=len(values),
    )
