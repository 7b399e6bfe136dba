"""Every CPU case of the adversarial suite through the real evaluator: its expected verdict, no crash,
no blame on the problem, and no process left behind."""

from __future__ import annotations

import os
import time

import pytest

from stark_mcp.problems import load_problem
from tests.adversarial import cases
from tests.adversarial.conftest import SUITE

CPU_CASES = cases.load(cases.HERE / "cpu")
pytestmark = pytest.mark.anyio


def leftovers() -> list[int]:
    """Processes the cases mark as ones that must not outlive their evaluation."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as fh:
                    if fh.read().strip() == "adv-leftover":
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_the_suite_covers_every_class_with_several_variants() -> None:
    classes: dict[str, int] = {}
    for case in CPU_CASES:
        classes[case.klass] = classes.get(case.klass, 0) + 1
    assert len(CPU_CASES) >= 40
    for klass in (
        "timed calls do no work",
        "secrets readable",
        "the judge is patchable",
        "blame and crashes",
    ):
        assert classes.get(klass, 0) >= 3, classes
    assert sum(1 for c in CPU_CASES if c.honest) >= 5


@pytest.mark.parametrize("case", CPU_CASES, ids=[c.name for c in CPU_CASES])
async def test_case(suite_evaluator, case: cases.Case) -> None:
    problem = load_problem(str(cases.HERE / "problems" / f"{case.problem}.py"))
    evaluation = await suite_evaluator.evaluate(
        problem, case.source, device="cpu", settings=SUITE, use_cache=False
    )
    ok, seen = cases.judge(case, evaluation)
    assert ok, (
        f"{case.name} ({case.klass}): expected {' | '.join(map(str, case.expect))}, got {seen}: "
        f"{evaluation.message[:300]}"
    )
    assert evaluation.trust is not None and evaluation.trust.isolation
    deadline = time.monotonic() + 5
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leftovers(), f"{case.name} left processes behind"
