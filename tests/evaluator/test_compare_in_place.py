"""Outputs compared where the runner published them (the path for outputs of gigabytes): the runner
is frozen while the worker reads them, and verdicts are the same as with a private copy."""

from __future__ import annotations

import pytest

from stark_mcp.records import Status
from tests.evaluator.conftest import FAST, evaluate_fixture

IN_PLACE = FAST.model_copy(update={"compare_in_place_bytes": 0})
pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "candidate,status",
    [
        ("torch_ok.py", Status.PASSED),
        ("off_by_tolerance.py", Status.WRONG_OUTPUT),
        ("nan_output.py", Status.WRONG_OUTPUT),
        ("mutates_input.py", Status.REJECTED),
    ],
)
async def test_in_place_comparison_gives_the_same_verdicts(evaluator, candidate: str, status: Status) -> None:
    copied = await evaluate_fixture(evaluator, "relu_sum.py", candidate, use_cache=False)
    in_place = await evaluate_fixture(evaluator, "relu_sum.py", candidate, IN_PLACE, use_cache=False)
    assert copied.status is status, copied.message
    assert in_place.status is status, in_place.message
    assert in_place.reason == copied.reason
    if status is Status.PASSED:
        assert in_place.trust is not None and in_place.trust.checked_calls >= FAST.trials
