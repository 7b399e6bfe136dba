"""Memoization on input values is defeated by fresh inputs on every call (the harness draws each
call's inputs from a fresh secret seed, checked and timed calls alike). A problem whose get_inputs()
ignores the seed cannot give fresh inputs: its evaluations say so (flag ``inputs_repeat``) instead
of presenting a memoizing candidate's speedup as evidence."""

from __future__ import annotations

import pytest

from stark_mcp.problems import problem_from_source
from tests.adversarial.conftest import SUITE

pytestmark = pytest.mark.anyio

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.tanh(a @ b)


def get_inputs():
    {body}


def get_init_inputs():
    return []
'''
FIXED = (
    "base = torch.arange(256 * 256, dtype=torch.float32).reshape(256, 256)\n"
    "    return [base.sin(), base.cos()]"
)
SEEDED = "return [torch.randn(256, 256), torch.randn(256, 256)]"

MEMO = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = None

    def forward(self, a, b):
        if self.seen is not None and torch.equal(self.seen[0], a) and torch.equal(self.seen[1], b):
            return self.seen[2]
        out = torch.tanh(a @ b)
        self.seen = (a.clone(), b.clone(), out)
        return out
'''


async def test_a_problem_whose_inputs_ignore_the_seed_flags_every_evaluation(suite_evaluator) -> None:
    fixed = problem_from_source(PROBLEM.replace("{body}", FIXED), name="fixed_inputs")
    seeded = problem_from_source(PROBLEM.replace("{body}", SEEDED), name="seeded_inputs")
    on_fixed = await suite_evaluator.evaluate(fixed, MEMO, device="cpu", settings=SUITE, use_cache=False)
    assert on_fixed.passed, on_fixed.message
    assert "inputs_repeat" in on_fixed.flags
    findings = on_fixed.trust.findings
    assert any("get_inputs() returns the same values" in f for f in findings), findings
    on_seeded = await suite_evaluator.evaluate(seeded, MEMO, device="cpu", settings=SUITE, use_cache=False)
    assert on_seeded.passed, on_seeded.message
    assert "inputs_repeat" not in on_seeded.flags
