"""Every evaluation's phases add up to its wall time, measured (``other`` holds the rest and stays small)."""

import pytest

from stark_mcp.records import Evaluation
from tests.evaluator.conftest import evaluate_fixture

pytestmark = pytest.mark.anyio

DEVICE_PHASES = {"queue", "process_start", "load", "inputs", "reference", "correctness", "timing", "teardown"}


def assert_phases_add_up(e: Evaluation) -> None:
    assert e.wall_seconds is not None and e.wall_seconds > 0
    named = {k: v for k, v in e.phase_seconds.items() if k != "other"}
    assert abs(sum(named.values()) - e.wall_seconds) <= 0.05 * e.wall_seconds, e.phase_seconds


async def test_a_torch_only_evaluation_accounts_for_its_wall_time(evaluator) -> None:
    messages: list[str] = []

    async def progress(done: float, total: float | None, message: str) -> None:
        messages.append(message)

    e = await evaluate_fixture(evaluator, "relu_sum.py", "torch_ok.py", use_cache=False, progress=progress)
    assert e.passed, e.message
    assert DEVICE_PHASES <= set(e.phase_seconds) and "build" not in e.phase_seconds
    assert_phases_add_up(e)
    order = [m for m in messages if m in ("load", "correctness", "timing")]
    assert order == ["load", "correctness", "timing"]
    # The last message names the verdict and where the time went, the largest phase first (timing
    # itself can be under the message's 0.05 s cut: ~80 calls of a 0.3 ms bracket).
    largest = max(e.phase_seconds, key=lambda name: e.phase_seconds[name])
    assert messages[-1].startswith(f"done: passed in {e.wall_seconds:.1f} s ({largest} "), messages[-1]
