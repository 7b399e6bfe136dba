"""The figure of record: what a candidate's report can and cannot gain over the trusted clock."""

from __future__ import annotations

import random

import pytest

from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.trusted import timing

OVERHEAD_MS = 0.12


def _baseline(rng: random.Random, true_ms: float, noise_ms: float, n: int = 100) -> timing.Samples:
    s = timing.Samples()
    for _ in range(n):
        t = true_ms + rng.gauss(0, noise_ms)
        s.add(int(t * 1e6), int((t + OVERHEAD_MS + rng.gauss(0, noise_ms)) * 1e6))
    return s


def _candidate(rng: random.Random, true_ms: float, report, noise_ms: float, n: int = 50) -> timing.Samples:
    s = timing.Samples()
    for i in range(n):
        t = true_ms + rng.gauss(0, noise_ms)
        s.add(int(report(t, i) * 1e6), int((t + OVERHEAD_MS + rng.gauss(0, noise_ms)) * 1e6))
    return s


def _figure(cand: timing.Samples, base: timing.Samples, abs_ms=0.002, rel=0.03, gap=0.0) -> timing.Figure:
    return timing.bounded(cand, timing.overhead(base), abs_ms, rel, gap)


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


@pytest.mark.parametrize("seed", range(5))
def test_an_honest_report_is_the_figure(seed: int) -> None:
    rng = random.Random(seed)
    base = _baseline(rng, 0.2, 0.002)
    fig = _figure(_candidate(rng, 0.1, lambda t, i: t, 0.002), base)
    assert fig.source == "reported" and not fig.findings and not fig.forged
    assert fig.reported_ms == pytest.approx(0.1, rel=0.03)


@pytest.mark.parametrize("shave", [0.95, 0.85, 0.7, 0.5, 0.25, 0.1])
def test_a_shaved_report_gains_at_most_the_slack(shave: float) -> None:
    # Whatever fraction of its true time a candidate reports, its figure of record is never more than
    # the slack below the trusted clock's, and the slack is a few percent here, not tens of microseconds.
    rng = random.Random(7)
    base = _baseline(rng, 0.2, 0.002)
    fig = _figure(_candidate(rng, 0.06, lambda t, i: t * shave, 0.002), base)
    figure_ms = _median(fig.samples_ms)
    assert fig.slack_ms is not None and fig.slack_ms <= 0.05 * fig.external_ms
    assert figure_ms >= fig.external_ms - fig.slack_ms - 1e-9
    assert figure_ms >= 0.06 * 0.94
    if shave <= 0.25:
        assert fig.forged


def test_reporting_noise_cannot_widen_the_slack() -> None:
    # A liar that scatters its reports (to look noisy) is judged with the same slack as one that
    # does not: the slack comes from the baseline's spread and the trusted brackets only.
    rng = random.Random(3)
    base = _baseline(rng, 0.2, 0.002)
    calm = _figure(_candidate(random.Random(1), 0.1, lambda t, i: 0.8 * t, 0.002), base)
    noisy = _figure(
        _candidate(random.Random(1), 0.1, lambda t, i: 0.8 * t * (0.05 if i % 2 else 1.6), 0.002), base
    )
    assert noisy.slack_ms == pytest.approx(calm.slack_ms, rel=0.05)
    assert noisy.source == "external"
    assert _median(noisy.samples_ms) >= 0.1 * 0.94


def test_a_noisy_harness_widens_the_slack_by_its_measured_noise() -> None:
    rng = random.Random(5)
    quiet = timing.overhead(_baseline(rng, 0.2, 0.001))
    loud = timing.overhead(_baseline(rng, 0.2, 0.02))
    assert quiet is not None and loud is not None and loud.sigma_ms > 5 * quiet.sigma_ms
    assert timing.slack_ms(1.0, loud, 50, 0.002, 0.001) > 5 * timing.slack_ms(1.0, quiet, 50, 0.002, 0.001)


def test_no_baseline_beside_it_means_no_bound_and_says_so() -> None:
    fig = timing.bounded(_candidate(random.Random(0), 0.1, lambda t, i: t, 0.001), None, 0.002, 0.03)
    assert fig.source == "reported" and fig.external_ms is None
    assert "no trusted bound" in fig.findings[0]


@pytest.mark.parametrize("cuda,true_ms", [(True, 0.4), (False, 0.4)])
def test_with_the_worker_defaults_shaved_reports_gain_little(cuda: bool, true_ms: float) -> None:
    s = EvalSettings().worker_settings("cuda" if cuda else "cpu")
    base = _baseline(random.Random(11), 0.2, 0.002)
    slack = (s.abs_slack_ms, s.rel_slack, s.forged_gap_ms)
    halved = _figure(_candidate(random.Random(12), true_ms, lambda t, i: t / 2, 0.002), base, *slack)
    assert halved.source == "external" and not halved.forged
    assert _median(halved.samples_ms) == pytest.approx(halved.external_ms, rel=0.02)
    assert _median(halved.samples_ms) >= true_ms * (0.95 if cuda else 0.8)
    quartered = timing.bounded(
        _candidate(random.Random(12), true_ms, lambda t, i: t / 4, 0.002),
        timing.overhead(base),
        *slack,
        forged_gap_overheads=s.forged_gap_overheads,
    )
    assert quartered.forged


def test_on_the_cpu_a_gap_inside_the_harness_share_is_not_forgery() -> None:
    # A 0.05 ms forward beside 0.52 ms of harness a call: the candidate runner's harness costing
    # 0.3 ms more than the baseline's is no lie, and must not reject the candidate.
    s = EvalSettings().worker_settings("cpu")
    base = _baseline(random.Random(2), 0.05, 0.001)
    base.bracket_ms = [b + 0.4 for b in base.bracket_ms]
    cand = _candidate(random.Random(3), 0.05, lambda t, i: t, 0.001)
    cand.bracket_ms = [b + 0.7 for b in cand.bracket_ms]
    over = timing.overhead(base)
    floors = (s.abs_slack_ms, s.rel_slack, s.forged_gap_ms)
    assert timing.bounded(cand, over, *floors).forged  # the floor in ms alone would reject it
    fig = timing.bounded(cand, over, *floors, forged_gap_overheads=s.forged_gap_overheads)
    assert not fig.forged and fig.source == "external"


def _blocked(values: list[tuple[float, float]], size: int) -> timing.Samples:
    s = timing.Samples()
    for i, (reported, bracket) in enumerate(values):
        if i % size == 0:
            s.start_block()
        s.add(int(reported * 1e6), int(bracket * 1e6))
    return s


def test_drift_between_blocks_widens_the_slack_where_per_call_spread_does_not() -> None:
    # Each block of calls is steady, but the harness's share moves from block to block (a VM's CPU
    # changing speed): the per-call spread is small, the block medians' spread is not.
    rng = random.Random(8)
    shares = [0.1, 0.25, 0.12, 0.3, 0.08, 0.22, 0.15, 0.28, 0.1, 0.2]
    rows = [(0.05, 0.05 + share + rng.gauss(0, 0.001)) for share in shares for _ in range(4)]
    drifting = timing.overhead(_blocked(rows, 4))
    flat = timing.overhead(_blocked(sorted(rows, key=lambda r: r[1]), 40))  # one block: no batches
    assert drifting is not None and flat is not None
    assert drifting.blocks == 10 and drifting.block_sigma_ms is not None and flat.block_sigma_ms is None
    wide = timing.slack_ms(1.0, drifting, 40, 0.01, 0.0, blocks=10)
    narrow = timing.slack_ms(1.0, drifting, 40, 0.01, 0.0, blocks=0)
    assert wide > 1.5 * narrow  # the drift counts once per block, not once per call
    # However wide the noise, per call or per block, it widens the slack to a capped share only.
    for blocks in (0, 10):
        capped = timing.slack_ms(0.2, drifting, 40, 0.01, 0.0, blocks=blocks)
        assert capped == pytest.approx(0.2 * timing.NOISE_SLACK_CAP)


def test_a_gap_smaller_than_the_forgery_floor_is_not_called_forgery() -> None:
    # Honest harness differences (GPU) can be a tenth of a millisecond: such a gap uses the trusted
    # figure, flagged, but does not reject the candidate.
    rng = random.Random(4)
    base = _baseline(rng, 0.2, 0.002)
    cand = _candidate(rng, 0.2, lambda t, i: t / 3, 0.002)
    assert _figure(cand, base, 0.04, 0.05, 0.0).forged
    lenient = _figure(cand, base, 0.04, 0.05, 0.25)
    assert not lenient.forged and lenient.source == "external"
    assert _median(lenient.samples_ms) == pytest.approx(0.2, rel=0.05)


def test_cpu_of_processes_that_ended_is_charged_to_the_windows_timed_calls() -> None:
    from stark_mcp.evaluator.sandbox.process_tree import JailCpu
    from stark_mcp.evaluator.trusted.cpu_window import WINDOW_ALLOWANCE_NS, CpuWindow

    cand = timing.Samples()
    window = CpuWindow()
    window.settle(JailCpu(1_000_000_000, {10: 600_000_000, 11: 400_000_000}), cand)  # opens the window
    window.calls = 4  # two untimed (checked top-up) calls, two timed ones
    for _ in range(2):
        window.timed.append(len(cand.bracket_ms))
        cand.add(100_000, 100_000)
    hidden = 4 * 300_000  # 0.3 ms a call done by processes that ended in between
    # The live processes used 0.4 ms (calls, and the harness between them); process 11 ended after
    # doing 0.2 ms more, a child (pid 12) came and stayed: all of it but what ended is on live clocks.
    live = {10: 600_000_000 + 400_000, 12: 50_000}
    gone = 200_000
    window.settle(JailCpu(1_000_000_000 + 400_000 + 50_000 + gone + hidden + WINDOW_ALLOWANCE_NS, live), cand)
    charged = gone + hidden
    assert cand.bracket_ms == pytest.approx([0.1 + charged / 4 / 1e6] * 2) and window.hidden_ns == charged
    # An honest window: whatever the live processes did between calls, nothing ended: no charge.
    window.calls = 1
    window.timed.append(len(cand.bracket_ms))
    cand.add(100_000, 100_000)
    assert window.start is not None
    busy = {pid: ns + 5_000_000 for pid, ns in window.start.live_ns.items()}
    window.settle(JailCpu(window.start.group_ns + 10_000_000 + WINDOW_ALLOWANCE_NS // 2, busy), cand)
    assert cand.bracket_ms[-1] == pytest.approx(0.1) and window.hidden_ns == charged
    window.settle(None, cand)  # no cgroup: nothing to compare with, nothing changes
    assert window.hidden_ns == charged


def test_a_reused_pid_can_only_raise_what_ended() -> None:
    from stark_mcp.evaluator.sandbox.process_tree import JailCpu

    before = JailCpu(10_000_000, {7: 9_000_000})
    # pid 7 ended after 1 ms more; a new process got pid 7 and used 0.5 ms: 1 ms went to a dead one.
    after = JailCpu(11_500_000, {7: 500_000})
    assert after.ended_since(before) >= 1_000_000


def test_a_report_gets_no_slack_once_the_trusted_clock_caught_hidden_work() -> None:
    cand = timing.Samples()
    for _ in range(20):
        cand.add(180_000, 200_000)  # 0.18 ms reported, 0.2 ms bracket: inside the slack
    over = timing.Overhead(0.0, 0.0, 20)
    assert timing.bounded(cand, over, 0.05, 0.15).source == "reported"
    distrusted = timing.bounded(cand, over, 0.05, 0.15, believe_report=False)
    assert distrusted.source == "external" and distrusted.samples_ms == pytest.approx([0.2] * 20)


@pytest.mark.parametrize(
    ("per_call_s", "expected", "min_blocks", "block"),
    [
        (0.0012, 40, 1, 16),  # GPU default: about 20 ms a block
        (0.0001, 30, 1, 50),  # GPU: 50 calls a block even when 30 are expected, as before
        (0.0012, 40, timing.MIN_BATCHES, 10),  # CPU: the 40 calls make 4 blocks, not 2 and a half
        (0.00001, 1000, timing.MIN_BATCHES, 50),  # never more than 50
        (0.5, 3, timing.MIN_BATCHES, 1),  # slow calls: one a block, as many blocks as calls
        (0.0012, 2, timing.MIN_BATCHES, 1),  # fewer calls than blocks wanted: still a call a block
    ],
)
def test_block_size(per_call_s: float, expected: int, min_blocks: int, block: int) -> None:
    assert timing.block_size(per_call_s, expected, min_blocks) == block


def test_the_expected_calls_make_the_blocks_the_drift_estimate_needs() -> None:
    for per_call_s in (1e-5, 3e-4, 1.2e-3, 4e-3, 0.02):
        for expected in range(timing.MIN_BATCHES, 200, 7):
            block = timing.block_size(per_call_s, expected, timing.MIN_BATCHES)
            assert -(-expected // block) >= timing.MIN_BATCHES, (per_call_s, expected, block)
