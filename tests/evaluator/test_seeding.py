"""The reference jail's seeding: every generator a problem's inputs can come from, at a cost that
suits a seed for every input made."""

from __future__ import annotations

import random
import traceback

import numpy
import pytest
import torch


@pytest.fixture
def problem():
    # imported by the test, not at collection: the module preloads what jails need (sympy among it)
    from stark_mcp.evaluator.reference import problem_code

    return problem_code


def test_one_seed_gives_the_same_inputs_from_every_generator(problem) -> None:
    def draw() -> tuple[torch.Tensor, float, float]:
        return torch.randn(8), random.random(), float(numpy.random.random())

    problem.seed_all(1234)
    first = draw()
    problem.seed_all(98765)
    other = draw()
    problem.seed_all(1234)
    again = draw()
    assert torch.equal(first[0], again[0]) and first[1:] == again[1:]
    assert not torch.equal(first[0], other[0]) and first[1] != other[1] and first[2] != other[2]


def test_a_torch_without_accelerators_is_seeded_without_recording_the_callers_stack(
    monkeypatch: pytest.MonkeyPatch, problem
) -> None:
    # torch.manual_seed queues a seed for CUDA with the stack it was called from (1-3 ms a call)
    if not problem._CPU_ONLY:
        pytest.skip("this torch was built for an accelerator: its generators are seeded too")

    def no_stack(*args: object, **kwargs: object) -> list[str]:
        raise AssertionError("a seed recorded the caller's stack")

    monkeypatch.setattr(traceback, "format_stack", no_stack)
    problem.seed_all(7)
    assert torch.random.default_generator.initial_seed() == 7
