"""What an honest GPU candidate's timing may show, for the GPU tests that time one.

On an H200 the two runner processes of a timing pass run the harness's CPU work at speeds up to 1.5x
apart, which puts the trusted figure of a kernel under ~0.2 ms off by a per-pass offset (up to 96 us
seen in about a hundred honest evaluations; docs/benchmarks/adversarial.md, 29 Nov, afternoon). Past
the 40 us slack that offset flags an honest report ``timing_mismatch`` (about one evaluation in ten
on such kernels). Open (issue 37): until the bracket is fixed, a test of an honest candidate accepts
a mismatch whose gap is within the largest offset seen, and fails on a wider one, which is what a
real regression (work the candidate's events miss) looks like."""

from __future__ import annotations

from typing import Any

HARNESS_OFFSET_BOUND_MS = 0.1  # the largest per-pass offset seen on an H200 (96 us), rounded up


def honest_timing_problem(evaluation: Any) -> str | None:
    """None when the honest ``evaluation`` has no mismatch, or one within the harness offset; else why."""
    if "timing_mismatch" not in evaluation.flags:
        return None
    trust = evaluation.trust
    if trust is None or trust.reported_ms is None or trust.external_ms is None:
        return "timing_mismatch without both figures"
    gap = trust.external_ms - trust.reported_ms
    if gap <= HARNESS_OFFSET_BOUND_MS:
        return None
    return (
        f"timing_mismatch {gap * 1e3:.0f} us past the report (reported {trust.reported_ms:.4g} ms, "
        f"trusted {trust.external_ms:.4g} ms): wider than the harness offset's {HARNESS_OFFSET_BOUND_MS} ms"
    )
