"""The pure progress mappings: strictly increasing whatever the core reports."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from stark_mcp.server.progress_relay import AttemptProgress, MonotonicProgress


def test_phases_continue_from_the_last_value() -> None:
    scale = MonotonicProgress()
    # create_run: the problem check (no total), then baselines 0..2 of 2, then "created".
    steps = [(0, None), (0, 2), (1, 2), (2, 2), (1, 1)]
    values = [scale.step(done, total) for done, total in steps]
    assert [v for v, _ in values] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert values[1][1] == 4.0 and values[3] == (4.0, 4.0)


def test_evaluator_steps_keep_their_scale() -> None:
    scale = MonotonicProgress()
    assert [scale.step(d, 5.0) for d in (2.0, 3.0, 4.0, 5.0)] == [(2.0, 5.0), (3.0, 5.0), (4.0, 5.0), (5.0,
        5.0)]


@given(st.lists(st.tuples(st.floats(0, 100), st.one_of(st.none(), st.floats(1, 100))), max_size=40))
def test_monotonic_progress_always_increases(steps: list[tuple[float, float | None]]) -> None:
    scale = MonotonicProgress()
    values = [scale.step(done, total)[0] for done, total in steps]
    assert all(b > a for a, b in itertools.pairwise(values))


def test_attempt_progress_stays_below_the_next_attempt() -> None:
    scale = AttemptProgress()
    steps = [scale.step(a, 3) for a in (0, 0, 0, 1, 1, 2, 2, 2, 3)]
    values = [s[0] for s in steps if s is not None]
    assert len(values) == 9 and all(s is not None and s[1] == 3.0 for s in steps)
    assert values[0] == 0 and values[3] == 1 and values[5] == 2 and values[-1] == 3
    assert all(b > a for a, b in itertools.pairwise(values))
    assert all(v < 1 for v in values[:3])
    assert scale.step(3, 3) is None, "nothing fits above the total once the last attempt is in"


@given(st.lists(st.integers(0, 20), max_size=60).map(sorted))
def test_attempt_progress_always_increases_within_the_total(attempts: list[int]) -> None:
    scale = AttemptProgress()
    pairs = [(scale.step(a, 20), a) for a in attempts]
    values = [(s[0], a) for s, a in pairs if s is not None]
    assert all(b[0] > a[0] for a, b in itertools.pairwise(values))
    assert all(int(v) == a and v <= 20 for v, a in values)
