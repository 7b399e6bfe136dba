import math

import pytest

from stark_mcp.evaluator.host.timing_stats import quantile, timing_stats


def test_median_and_iqr_use_linear_interpolation() -> None:
    stats = timing_stats([4.0, 1.0, 3.0, 2.0])
    assert stats.median_ms == 2.5
    assert stats.iqr_ms == pytest.approx(3.25 - 1.75)
    assert (stats.min_ms, stats.max_ms, stats.samples, stats.unit) == (1.0, 4.0, 4, "ms")
    assert stats.mean_ms == 2.5


def test_single_sample_has_zero_iqr() -> None:
    stats = timing_stats([0.7])
    assert stats.median_ms == 0.7 and stats.iqr_ms == 0.0


def test_outlier_moves_mean_not_median() -> None:
    stats = timing_stats([1.0] * 29 + [1000.0])
    assert stats.median_ms == 1.0
    assert stats.mean_ms > 30


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [-1.0], [math.inf]])
def test_invalid_samples_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        timing_stats(bad)


def test_quantile_endpoints() -> None:
    assert quantile([1.0, 5.0, 9.0], 0.0) == 1.0
    assert quantile([1.0, 5.0, 9.0], 1.0) == 9.0
