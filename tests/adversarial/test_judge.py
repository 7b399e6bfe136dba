"""The suite's judge on made-up verdicts: what each expectation accepts and what it refuses."""

from __future__ import annotations

from types import SimpleNamespace

from adversarial import cases
from stark_mcp.records import Status


def verdict(status: Status, reason: str | None = None, speedup: float | None = None, flags=(),
            device: str = "cpu", clocks: tuple[float, float, float] | None = None) -> object:
    """``clocks``: the trust report's (reported, external, overhead) medians, in ms."""
    reported, external, overhead = clocks or (None, None, None)
    trust = SimpleNamespace(reported_ms=reported, external_ms=external, overhead_ms=overhead)
    return SimpleNamespace(status=status, reason=reason, speedups={"eager": speedup} if speedup else {},
                           flags=list(flags), device=device, trust=trust)


def case(expect: str) -> cases.Case:
    return cases.Case(cases.HERE / "x.py", "k", "scaled_add", cases.parse_expect(expect))


def test_forgery_is_met_by_rejection_or_by_the_trusted_figure_replacing_the_lie() -> None:
    forged = case("rejected/timing_forged")
    assert cases.judge(forged, verdict(Status.REJECTED, "timing_forged"))[0]
    assert cases.judge(forged, verdict(Status.PASSED, speedup=0.95, flags=["timing_mismatch"]))[0]
    # Without the flag the reported figure was used: the lie went unnoticed.
    assert not cases.judge(forged, verdict(Status.PASSED, speedup=0.95))[0]
    # With the flag but an unearned speedup, the trusted figure was not low enough to be the truth.
    assert not cases.judge(forged, verdict(Status.PASSED, speedup=2.0, flags=["timing_mismatch"]))[0]
    assert not cases.judge(forged, verdict(Status.REJECTED, "tamper"))[0]


def test_honest_controls_must_pass_with_both_clocks_agreeing() -> None:
    honest = case("passed")
    assert cases.judge(honest, verdict(Status.PASSED, speedup=3.0))[0]
    assert not cases.judge(honest, verdict(Status.PASSED, speedup=3.0, flags=["timing_mismatch"]))[0]
    assert not cases.judge(honest, verdict(Status.WRONG_OUTPUT, "tolerance"))[0]


def test_an_honest_cpu_control_may_be_flagged_only_by_what_a_cold_harness_explains() -> None:
    honest = case("passed")
    flagged = {"speedup": 0.3, "flags": ["timing_mismatch"]}
    # Trusted figure 0.14 ms above the report, the harness's share 0.10 ms: a cold harness explains it.
    assert cases.judge(honest, verdict(Status.PASSED, **flagged, clocks=(0.30, 0.44, 0.10)))[0]
    # 0.25 ms above it is more than twice the share: not the harness.
    assert not cases.judge(honest, verdict(Status.PASSED, **flagged, clocks=(0.30, 0.55, 0.10)))[0]
    # Without the figures nothing can be said.
    assert not cases.judge(honest, verdict(Status.PASSED, **flagged))[0]


def test_an_honest_gpu_control_may_be_flagged_only_by_what_the_brackets_outliers_explain() -> None:
    honest = case("passed")
    flagged = {"speedup": 0.9, "flags": ["timing_mismatch"]}
    # 55 us above a 0.32 ms report (seen on an H100): an outlier of the bracket.
    on_gpu = {**flagged, "device": "cuda"}
    assert cases.judge(honest, verdict(Status.PASSED, **on_gpu, clocks=(0.32, 0.375, 0.6)))[0]
    # 0.14 ms above it is past every outlier measured, however large the harness's share.
    assert not cases.judge(honest, verdict(Status.PASSED, **on_gpu, clocks=(0.30, 0.44, 0.6)))[0]
    # A trusted figure below the report is no outlier an honest harness makes.
    assert not cases.judge(honest, verdict(Status.PASSED, **on_gpu, clocks=(0.30, 0.25, 0.6)))[0]


def test_bounded_pass_and_any_reason() -> None:
    bounded = case("wrong_output/* | passed<=1.35")
    assert cases.judge(bounded, verdict(Status.WRONG_OUTPUT, "shape"))[0]
    assert cases.judge(bounded, verdict(Status.PASSED, speedup=1.2))[0]
    assert not cases.judge(bounded, verdict(Status.PASSED, speedup=1.5))[0]
