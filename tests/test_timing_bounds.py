"""The GPU tests' allowance for an honest mismatch (tests/timing_bounds.py) takes the documented
harness offset and nothing wider."""

from __future__ import annotations

from types import SimpleNamespace

from tests.timing_bounds import HARNESS_OFFSET_BOUND_MS, honest_timing_problem


def evaluation(flags: list[str], reported: float | None, external: float | None) -> SimpleNamespace:
    return SimpleNamespace(flags=flags, trust=SimpleNamespace(reported_ms=reported, external_ms=external))


def test_no_mismatch_and_a_mismatch_within_the_offset_are_honest() -> None:
    assert honest_timing_problem(evaluation([], 0.045, 0.107)) is None
    within = 0.045 + 0.99 * HARNESS_OFFSET_BOUND_MS
    assert honest_timing_problem(evaluation(["timing_mismatch"], 0.045, within)) is None


def test_a_wider_gap_or_missing_figures_fail() -> None:
    wide = honest_timing_problem(evaluation(["timing_mismatch"], 0.045, 0.2))
    assert wide is not None and "155 us" in wide
    assert honest_timing_problem(evaluation(["timing_mismatch"], None, 0.2)) is not None
