"""A checked call looks like any other from inside the candidate: its outputs are read with the
runner frozen, into memory the runner does not map. A candidate that watches the shared outputs region
for the read (a thread polling it, and a look between calls) sees nothing, on the CPU path where the
worker reads the runner's memory by address."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stark_mcp.problems import load_problem
from stark_mcp.records import Status
from tests.evaluator.conftest import FAST

PROBLEM = Path(__file__).resolve().parents[1] / "adversarial" / "problems" / "scaled_add.py"
pytestmark = pytest.mark.anyio

# Honest forward; a thread polls the first bytes of every shared region the size of its output, and
# counts the changes made while no forward of its own ran. The 12th call (past the five correctness
# trials, every one checked) raises with the count, so the verdict's message says what it saw.
WATCHER = '''
import ctypes
import threading
import time

import torch
import torch.nn as nn

OUT_BYTES = 1024 * 1024 * 4


def _regions():
    found = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            if "stark-region" in line:
                start, end = (int(x, 16) for x in line.split()[0].split("-"))
                if end - start == OUT_BYTES:
                    found.append(start)
    return found


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.calls = 0
        self.seen = 0
        self.busy = False
        threading.Thread(target=self._watch, daemon=True).start()

    def _peek(self):
        return [ctypes.string_at(a, 64) for a in _regions()]

    def _watch(self):
        last = None
        while True:
            time.sleep(0.0001)
            if self.busy:
                last = None
                continue
            now = self._peek()
            if last is not None and now != last and not self.busy:
                self.seen += 1
            last = now

    def forward(self, a, b):
        self.busy = True
        self.calls += 1
        if self.calls == 12:
            raise RuntimeError(f"regions: {len(_regions())}; the watcher saw {self.seen} reads")
        out = torch.relu(a * self.scale + b)
        self.busy = False
        return out
'''


async def test_a_watcher_in_the_candidate_never_sees_a_checked_call_read(evaluator) -> None:
    problem = load_problem(str(PROBLEM))
    evaluation = await evaluator.evaluate(problem, WATCHER, device="cpu", settings=FAST, use_cache=False)
    assert evaluation.status is Status.RUNTIME_ERROR, evaluation.message
    found = re.search(r"regions: (\d+); the watcher saw (\d+) reads", evaluation.message)
    assert found, evaluation.message
    regions, seen = int(found.group(1)), int(found.group(2))
    assert regions >= 1  # it did find the outputs region it watched
    assert seen == 0, evaluation.message  # five checked trials, and not one read was seen
