"""A jail's memory cap (EvalSettings.jail_memory_bytes, cgroup memory.max or a v1 memory group)
covers memory held outside every process's resident set: shared memory files a candidate wrote and
unmapped. Past it the candidate gets ``runtime_error (resource)``; the worker and the parent live on
and evaluate the next candidate."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator.sandbox.levels import detect
from stark_mcp.problems import load_problem
from stark_mcp.records import Status
from tests.evaluator.conftest import FAST

PROBLEM = Path(__file__).resolve().parents[1] / "adversarial" / "problems" / "scaled_add.py"
HONEST = (Path(__file__).resolve().parents[1] / "adversarial" / "cpu" / "honest_fused_add.py").read_text()
CAPPED = FAST.model_copy(update={"jail_memory_bytes": 512 << 20})
pytestmark = pytest.mark.anyio

# 1 GiB in eight memfds of 128 MiB (each under the jail's file size limit), written and never mapped:
# in no process's resident set.
HOARDER = '''
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.held = []

    def forward(self, a, b):
        if not self.held:
            chunk = b"\\1" * (1 << 20)
            for i in range(8):
                fd = os.memfd_create(f"held{i}")
                for _ in range(128):
                    os.write(fd, chunk)
                self.held.append(fd)
        return torch.relu(a * self.scale + b)
'''


def capped_here() -> bool:
    info = detect()
    return bool(info.root and info.cgroup)


@pytest.mark.skipif(not capped_here(), reason="needs root and a writable cgroup hierarchy")
async def test_memory_held_in_unmapped_shared_files_hits_the_jail_cap(evaluator) -> None:
    problem = load_problem(str(PROBLEM))
    hoarder = await evaluator.evaluate(problem, HOARDER, device="cpu", settings=CAPPED, use_cache=False)
    assert hoarder.status is Status.RUNTIME_ERROR, hoarder.message
    assert hoarder.reason == "resource", hoarder.message
    assert "memory cap (512 MiB)" in hoarder.message, hoarder.message
    # The worker and the parent lived on: the same evaluator, the same cap, an honest candidate passes.
    honest = await evaluator.evaluate(problem, HONEST, device="cpu", settings=CAPPED, use_cache=False)
    assert honest.passed, honest.message


def test_a_missing_memory_cap_is_said_in_the_trust_note_at_every_level() -> None:
    from stark_mcp.evaluator.sandbox.levels import NO_MEMORY_CAP, IsolationInfo

    capless = f"{NO_MEMORY_CAP}, no pids.max and no freezer: no writable cgroup v2 hierarchy"
    info = IsolationInfo(level="sandbox", notes=["bubblewrap note", capless])
    assert info.note == capless
    assert IsolationInfo(level="sandbox", notes=["bubblewrap note"]).note == ""
    assert capless in IsolationInfo(level="uid", notes=["why uid", capless]).note
