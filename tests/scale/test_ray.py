"""``--executor ray`` on a local Ray cluster of CPU slots: the same benchmark results as the local executor,
and a killed actor replaced with its evaluation retried (real actors, real workers, real jails)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from stark_mcp.bench import BenchPlan, BenchSpec, plan_bench, run_bench
from stark_mcp.config import Settings
from stark_mcp.evaluator import EvalSettings
from stark_mcp.evaluator.host.ray_executor import RayExecutor
from stark_mcp.llm import ScriptedBackend
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.session import open_service
from stark_mcp.problems import load_problem
from stark_mcp.records import Status
from tests.bench.conftest import FAST
from tests.bench.replies import PROBLEMS, RELU_CRASH, RELU_FUSED, RELU_WRONG, write_replies

# Imported by the one worker that runs these (about a second), not by every worker's collection.
if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray is not installed (the 'ray' extra)", allow_module_level=True)

# one worker runs both: the module's Ray cluster is started once
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("ray")]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """Three CPU slots: two evaluation actors and one for builds."""
    import ray

    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
async def ray_service(cluster: None, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunService]:
    """The service as ``--executor ray`` opens it, shared so the actors start once."""
    async with open_service(Settings(home=tmp_path_factory.mktemp("ray"), executor="ray")) as service:
        yield service


def _plan(out: Path) -> BenchPlan:
    return plan_bench(
        BenchSpec(
            problems=str(PROBLEMS),
            select=["scaled_relu"],
            strategies=["sampling"],
            budget=3,
            device="cpu",
            parallel=0,
            out=out,
            eval_settings=EvalSettings(baselines=("eager",), **FAST),
        )
    )


async def _attempts(service: RunService, out: Path, replies: Path) -> list[tuple[str, str]]:
    """One problem, best-of-3 sampling with scripted replies; the attempts' (source, verdict) pairs."""
    outcome = await run_bench(service, _plan(out), ScriptedBackend.from_file(replies))
    assert outcome.complete == 1, outcome
    (run,) = [r for r in await service.store.list_runs() if r.config["bench"]["id"] == outcome.bench_id]
    assert run.config["device_name"]
    nodes = [n for n in await service.store.nodes(run.id) if n.action.value != "root"]
    return sorted((n.source, n.evaluation.status.value) for n in nodes if n.evaluation is not None)


@pytest.mark.slow
async def test_a_scripted_benchmark_through_ray_gives_the_local_executors_results(
    ray_service: RunService, tmp_path: Path
) -> None:
    assert isinstance(ray_service.evaluator, RayExecutor)
    replies = write_replies(tmp_path / "replies.jsonl", [RELU_WRONG, RELU_FUSED, RELU_CRASH])
    through_ray = await _attempts(ray_service, tmp_path / "ray", replies)
    async with open_service(Settings(home=tmp_path / "local")) as local_service:
        local = await _attempts(local_service, tmp_path / "local-out", replies)
    assert through_ray == local
    assert sorted(verdict for _, verdict in local) == ["passed", "runtime_error", "wrong_output"]


# Slow to construct, so the evaluation lasts seconds and the kill lands inside it. Not slow in
# forward: a forward that sleeps leaves the harness's caches cold after each call, and on a loaded
# 2-core VM its trusted share of a 0.2 ms call rose 0.15-0.3 ms above the baseline's, enough that
# this honest candidate was once rejected as timing_forged (reported 0.206 ms, trusted 0.520 ms).
SLOW_CANDIDATE = """import time
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        time.sleep(3.0)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a + b)
"""


async def test_a_killed_actor_is_replaced_and_its_evaluation_retried(ray_service: RunService) -> None:
    executor = ray_service.evaluator
    assert isinstance(executor, RayExecutor)
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    settings = EvalSettings(baselines=("eager",), **FAST)
    pool = executor._pool_or_fail()
    pool.history.clear()
    assert await executor.slots("auto") == 2 and await executor.resolve_device("auto") == "cpu"
    job = asyncio.create_task(executor.evaluate(problem, SLOW_CANDIDATE, settings=settings, use_cache=False))
    while not any(slot.busy for slot in pool.slots):
        await asyncio.sleep(0.02)
    victim = next(slot for slot in pool.slots if slot.busy)
    killed_pid = victim.handle.pid
    await asyncio.sleep(0.5)
    os.kill(killed_pid, signal.SIGKILL)
    result = await job
    assert result.status is Status.PASSED, result.message
    outcomes = [(lease.slot, lease.outcome) for lease in pool.history]
    assert outcomes[0] == (victim.label, "fault") and outcomes[-1][1] == "ok", outcomes
    assert outcomes[-1][0] != victim.label
    # The slot starts a new actor for its next job.
    assert json.loads(await executor._call(victim.handle, "isolation"))["level"]
    assert victim.handle.pid not in (0, killed_pid)
