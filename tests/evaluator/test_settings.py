import pytest
from pydantic import ValidationError

from stark_mcp.evaluator import EvalSettings


def test_hash_is_stable_and_covers_fields() -> None:
    a, b = EvalSettings(), EvalSettings()
    assert a.settings_hash == b.settings_hash and len(a.settings_hash) == 16
    assert EvalSettings(trials=7).settings_hash != a.settings_hash
    assert EvalSettings(tolerance_floor=1e-3).settings_hash != a.settings_hash


def test_timing_hash_ignores_correctness_knobs() -> None:
    base = EvalSettings()
    assert EvalSettings(trials=9, correctness_timeout_s=5).timing_hash == base.timing_hash
    assert EvalSettings(min_calls=50).timing_hash != base.timing_hash


def test_unknown_baseline_and_frozen() -> None:
    with pytest.raises(ValidationError):
        EvalSettings(baselines=("eager", "reduce_overhead"))
    with pytest.raises(ValidationError):
        EvalSettings().trials = 3  # type: ignore[misc]


def test_cpu_children_get_one_thread_by_default() -> None:
    assert EvalSettings().device_env("cpu") == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert EvalSettings().device_env("cuda") == {}
    assert EvalSettings(cpu_threads=0).device_env("cpu") == {}
