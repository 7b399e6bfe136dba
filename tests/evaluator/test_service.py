"""The service around the pipeline: caches, sharing, cancellation, problem checks, baselines, devices."""

import asyncio
import os
import time
from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator import Evaluator, EvaluatorError
from stark_mcp.evaluator.builds import BuildCache
from stark_mcp.evaluator.worker import LocalWorker
from stark_mcp.problems import ProblemError, load_problem
from stark_mcp.records import Status
from tests.evaluator.conftest import FAST, FIXTURES, fixture_text

pytestmark = pytest.mark.anyio


def problem(name: str = "relu_sum.py"):
    return load_problem(str(FIXTURES / name))


async def test_second_evaluation_comes_from_the_cache(cache_dir) -> None:
    settings = FAST.model_copy(update={"trials": 3})
    async with Evaluator(cache_dir, settings) as ev:
        first = await ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu")
        start = time.monotonic()
        second = await ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu")
    assert first.status is Status.PASSED and not first.cached
    assert second.cached and time.monotonic() - start < 1.0
    assert second.model_dump(exclude={"cached"}) == first.model_dump(exclude={"cached"})


class CountingWorker(LocalWorker):
    def __init__(self, root: Path) -> None:
        super().__init__(BuildCache(root), 1)
        self.calls = 0

    async def evaluate(self, *args, **kwargs):
        self.calls += 1
        return await super().evaluate(*args, **kwargs)


async def test_identical_concurrent_requests_share_one_evaluation(cache_dir) -> None:
    worker = CountingWorker(cache_dir / "builds")
    settings = FAST.model_copy(update={"trials": 2})
    async with Evaluator(cache_dir, settings, worker=worker) as ev:
        results = await asyncio.gather(*[
            ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu",
                use_cache=False) for _ in range(3)])
    assert worker.calls == 1
    assert all(r.status is Status.PASSED for r in results)
    assert results[0] == results[1] == results[2]


HANG = '''
import os, time
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        with open(PIDFILE, "w") as fh:
            fh.write(str(os.getpid()))
        while True:
            time.sleep(0.05)
'''


async def test_cancelling_the_caller_kills_the_candidate_process(cache_dir, tmp_path) -> None:
    pidfile = tmp_path / "pid"
    source = HANG.replace("PIDFILE", repr(str(pidfile)))
    async with Evaluator(cache_dir, FAST) as ev:
        task = asyncio.create_task(ev.evaluate(problem(), source, device="cpu", use_cache=False))
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        pid = int(pidfile.read_text())
        os.kill(pid, 0)  # alive and hanging
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_check_problem_accepts_a_good_problem(cache_dir) -> None:
    async with Evaluator(cache_dir, FAST) as ev:
        await ev.check_problem(problem("affine_tanh.py"), device="cpu")


@pytest.mark.parametrize("name,needles", [
    ("problem_import_error.py", ["import failed", "stark_missing_dependency"]),
    ("problem_inputs_raise.py", ["get_inputs() failed", "no inputs today"]),
])
async def test_check_problem_names_what_is_wrong(cache_dir, name, needles) -> None:
    async with Evaluator(cache_dir, FAST) as ev:
        with pytest.raises(ProblemError) as info:
            await ev.check_problem(problem(name), device="cpu")
    for needle in needles:
        assert needle in str(info.value)


async def test_evaluating_against_a_broken_problem_raises_problem_error(cache_dir) -> None:
    async with Evaluator(cache_dir, FAST) as ev:
        with pytest.raises(ProblemError, match="no inputs today"):
            await ev.evaluate(problem("problem_inputs_raise.py"),
                              "import torch.nn as nn\nclass ModelNew(nn.Module):\n"
                              "    def forward(self, x):\n        return x * 2\n", device="cpu")


async def test_baselines_are_timed_once_then_cached(cache_dir) -> None:
    settings = FAST.model_copy(update={"min_calls": 31})  # a timing hash of its own
    async with Evaluator(cache_dir, settings) as ev:
        first = await ev.baselines(problem("affine_tanh.py"), device="cpu", which=["eager"])
        start = time.monotonic()
        second = await ev.baselines(problem("affine_tanh.py"), device="cpu", which=["eager"])
        assert time.monotonic() - start < 1.0
        with pytest.raises(EvaluatorError, match="unknown baseline"):
            await ev.baselines(problem(), device="cpu", which=["reduce_overhead"])
    assert first == second and first["eager"].samples >= 31 and first["eager"].median_ms > 0
    assert list((cache_dir / "baselines").glob("*.json"))


async def test_device_resolution(cache_dir) -> None:
    async with Evaluator(cache_dir, FAST) as ev:
        assert await ev.resolve_device("cpu") == "cpu"
        assert await ev.resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
        with pytest.raises(EvaluatorError, match="unknown device"):
            await ev.resolve_device("tpu")
        if not torch.cuda.is_available():
            with pytest.raises(EvaluatorError, match="no CUDA device"):
                await ev.resolve_device("cuda")
