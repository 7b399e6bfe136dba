"""A trusted step that fails while a candidate lives is tried again without it before anyone is blamed.

The shared resource here is a file lock in a folder the candidate may read (the problem's import
root): the problem's ``get_inputs`` fails while someone holds it exclusively, as the worker's input
generation fails on a GPU whose memory a candidate holds. Real worker, real jails, real lock.
"""

from __future__ import annotations

import fcntl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator, EvaluatorError
from stark_mcp.problems import load_problem
from stark_mcp.records import Status
from tests.toolchain import shared_toolchain

pytestmark = pytest.mark.anyio

QUICK = EvalSettings(
    baselines=("eager",), trials=3, warmup_s=0.0, min_time_s=0.2, max_time_s=0.3, input_sets=1, min_calls=3
)

PROBLEM = '''
import fcntl, os
import torch
import torch.nn as nn

STARK_IMPORT_ROOTS = [{root!r}]
LOCK = os.path.join(STARK_IMPORT_ROOTS[0], "pool.lock")


class Model(nn.Module):
    def forward(self, a, b):
        if {where!r} == "float64" and a.dtype == torch.float64:
            pool_free()
        return torch.relu(a + b)


def pool_free():
    with open(LOCK) as held:
        try:
            fcntl.flock(held, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise {error}("the shared pool is taken") from None


def get_inputs():
    if {where!r} == "inputs":
        pool_free()
    return [torch.randn(64, 256), torch.randn(64, 256)]


def get_init_inputs():
    return []
'''

# Honest arithmetic; from its first call on it keeps the lock the problem's inputs need.
HOLDER = '''
import fcntl
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.held = None

    def forward(self, a, b):
        if self.held is None:
            self.held = open({lock!r})
            fcntl.flock(self.held, fcntl.LOCK_EX)
        return torch.relu(a + b)
'''

HONEST = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)
'''


@pytest.fixture(scope="module")  # its own: one test counts the faults of its only worker
async def lock_evaluator(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Evaluator]:
    cache = tmp_path_factory.mktemp("alone") / "cache"
    async with Evaluator(cache, QUICK, cpu_workers=1, toolchain_dir=shared_toolchain()) as ev:
        yield ev


def problem_with_lock(folder: Path, error: str, where: str = "inputs"):
    """``where`` the problem needs the pool: its ``get_inputs``, or its model run in float64 (the
    reference's twin, which the worker runs beside the model's own precision)."""
    root = folder / "shared"
    root.mkdir()
    (root / "pool.lock").write_text("")
    path = folder / "problem.py"
    path.write_text(PROBLEM.format(root=str(root), error=error, where=where), encoding="utf-8")
    return load_problem(str(path)), root / "pool.lock"


# MemoryError is how running out of memory reads (ResourceExhausted); RuntimeError is any other
# failure of the problem's own code (a cuBLAS workspace it could not get, say): both are retried alone.
@pytest.mark.parametrize("error", ["MemoryError", "RuntimeError"])
async def test_a_candidate_that_takes_what_the_inputs_need_gets_the_blame(
    lock_evaluator: Evaluator, tmp_path: Path, error: str
) -> None:
    problem, lock = problem_with_lock(tmp_path, error)
    result = await lock_evaluator.evaluate(
        problem, HOLDER.format(lock=str(lock)), device="cpu", use_cache=False
    )
    assert (result.status, result.reason) == (Status.RUNTIME_ERROR, "resource"), result.message
    assert "works without it" in result.message and "the shared pool is taken" in result.message
    # The worker is no worse for it: an honest candidate passes next, on the same worker.
    after = await lock_evaluator.evaluate(problem, HONEST, device="cpu", use_cache=False)
    assert after.status is Status.PASSED, after.message
    pool = await lock_evaluator.worker_pool("cpu")
    assert all(slot.faults == 0 and not slot.retired for slot in pool.slots)


async def test_a_step_that_fails_alone_too_is_not_the_candidates_and_costs_the_worker_one_fault(
    lock_evaluator: Evaluator, tmp_path: Path
) -> None:
    """The lock is taken by someone else (this test) once timing starts: alone the inputs fail too,
    so it is the machine's fault, retried and reported as such; the job counts once against the
    worker, which stays in service for the next one."""
    problem, lock = problem_with_lock(tmp_path, "MemoryError")
    held: list[object] = []

    async def take_in_timing(_done: float, _total: float | None, message: str) -> None:
        if message == "timing" and not held:
            handle = open(lock)  # noqa: SIM115 - held across calls, closed below
            fcntl.flock(handle, fcntl.LOCK_EX)
            held.append(handle)

    try:
        with pytest.raises(EvaluatorError, match="failed 3 times in a row: out of memory in the trusted"):
            await lock_evaluator.evaluate(
                problem, HONEST, device="cpu", use_cache=False, progress=take_in_timing
            )
    finally:
        for handle in held:
            handle.close()  # type: ignore[attr-defined]
    assert held, "the evaluation never reached its timing phase"
    pool = await lock_evaluator.worker_pool("cpu")
    assert [(slot.faults, slot.retired) for slot in pool.slots] == [(1, False)]
    after = await lock_evaluator.evaluate(problem, HONEST + "\n# again\n", device="cpu", use_cache=False)
    assert after.status is Status.PASSED, after.message


async def test_a_candidate_cannot_take_the_float64_reference_away_from_those_after_it(
    lock_evaluator: Evaluator, tmp_path: Path
) -> None:
    """The float64 twin failing while a candidate holds what it needs is that call's trouble: the
    candidate is blamed and the next one is still judged against float64. (It used to be switched
    off for good: one submission could loosen the judging of every later one.)"""
    problem, lock = problem_with_lock(tmp_path, "RuntimeError", where="float64")
    result = await lock_evaluator.evaluate(
        problem, HOLDER.format(lock=str(lock)), device="cpu", use_cache=False
    )
    assert (result.status, result.reason) == (Status.RUNTIME_ERROR, "resource"), result.message
    assert "float64" in result.message
    after = await lock_evaluator.evaluate(problem, HONEST, device="cpu", use_cache=False)
    assert after.status is Status.PASSED, after.message
    assert "no_fp64_reference" not in after.flags, after.flags


async def test_a_model_that_cannot_run_in_float64_is_judged_at_its_own_precision(
    lock_evaluator: Evaluator, tmp_path: Path
) -> None:
    """Found at load, with no candidate alive: every evaluation goes on without the twin, and says so."""
    path = tmp_path / "no_double.py"
    path.write_text(NO_DOUBLE, encoding="utf-8")
    problem = load_problem(str(path))
    for _ in range(2):
        result = await lock_evaluator.evaluate(problem, HONEST, device="cpu", use_cache=False)
        assert result.status is Status.PASSED, result.message
        assert "no_fp64_reference" in result.flags, result.flags
        assert result.trust is not None
        assert any("cannot run in float64" in f for f in result.trust.findings), result.trust.findings


NO_DOUBLE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        if a.dtype == torch.float64:
            raise TypeError("this model is float32 only")
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(64, 256), torch.randn(64, 256)]


def get_init_inputs():
    return []
"""
