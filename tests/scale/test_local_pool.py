"""The local executor's pool: two CPU workers stand in for two GPUs (real worker processes, real jails)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator, EvaluatorError
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.gpu_choice import choose_gpus, parse_gpus, visible_physical
from stark_mcp.evaluator.host.slot_pool import Lease, PoolExhausted, Slot, SlotPool
from stark_mcp.evaluator.host.worker_handles import WorkerCrashed
from stark_mcp.problems import load_problem
from stark_mcp.records import Status
from tests.toolchain import shared_toolchain

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"
PROBLEM = load_problem(str(FIXTURES / "relu_sum.py"))
CANDIDATE = (FIXTURES / "torch_ok.py").read_text()
# A few tenths of a second of timing: a kill sent when timing starts lands inside it.
QUICK = EvalSettings(
    baselines=("eager",), trials=2, warmup_s=0.0, min_time_s=0.2, max_time_s=0.3, input_sets=1, min_calls=3
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def two_workers(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Evaluator]:
    cache = tmp_path_factory.mktemp("pool") / "cache"
    async with Evaluator(cache, QUICK, cpu_workers=2, toolchain_dir=shared_toolchain()) as ev:
        yield ev


def variant(n: int) -> str:
    """The same kernel under another source hash: a separate evaluation, never a cache hit."""
    return f"{CANDIDATE}\n# variant {n}\n"


def overlapping(a: Lease, b: Lease) -> bool:
    return a.started < b.ended and b.started < a.ended


async def test_two_workers_evaluate_at_once_and_never_two_on_one_worker(two_workers: Evaluator) -> None:
    results = await asyncio.gather(
        *(two_workers.evaluate(PROBLEM, variant(n), device="cpu", use_cache=False) for n in range(3))
    )
    assert [r.status for r in results] == [Status.PASSED] * 3, [r.message for r in results]
    leases = [lease for lease in (await two_workers.worker_pool("cpu")).history if lease.outcome == "ok"]
    assert {lease.slot for lease in leases} == {"cpu:0", "cpu:1"}
    for i, a in enumerate(leases):
        for b in leases[i + 1 :]:
            if a.slot == b.slot:
                assert not overlapping(a, b), f"two jobs at once on {a.slot}: {a} {b}"
    assert any(overlapping(a, b) for a in leases for b in leases if a.slot != b.slot), leases
    assert await two_workers.slots("cpu") == 2


async def test_a_worker_killed_mid_evaluation_is_retried_elsewhere_and_the_result_lands(
    two_workers: Evaluator,
) -> None:
    pool = await two_workers.worker_pool("cpu")
    pool.history.clear()
    killed: list[str] = []

    async def kill_in_timing(_done: float, _total: float | None, message: str) -> None:
        if message == "timing" and not killed:
            busy = next(s for s in pool.slots if s.busy)
            assert busy.handle.proc is not None
            os.kill(busy.handle.proc.pid, signal.SIGKILL)
            killed.append(busy.label)

    result = await two_workers.evaluate(
        PROBLEM, variant(9), device="cpu", use_cache=False, progress=kill_in_timing
    )
    assert killed, "the evaluation never reached its timing phase"
    assert result.status is Status.PASSED, result.message
    outcomes = [(lease.slot, lease.outcome) for lease in pool.history]
    assert (killed[0], "fault") in outcomes
    retried = [slot for slot, outcome in outcomes if outcome == "ok"]
    assert retried and retried[-1] != killed[0], outcomes  # retried on the other worker


async def test_a_slot_that_keeps_faulting_leaves_the_pool_and_an_empty_pool_says_so() -> None:
    retired: list[str] = []

    async def retire(slot: Slot[str]) -> None:
        retired.append(slot.label)

    pool: SlotPool[str] = SlotPool(
        [Slot("gpu:0", "bad"), Slot("gpu:1", "good")],
        max_faults=2,
        on_retire=retire,
        fault_types=(WorkerCrashed,),
    )

    async def job(handle: str) -> str:
        if handle == "bad":
            raise WorkerCrashed("Xid 79: GPU has fallen off the bus")
        return handle

    assert [await pool.run(job, prefer=lambda s: s.label == "gpu:0") for _ in range(2)] == ["good", "good"]
    assert retired == ["gpu:0"] and [s.label for s in pool.live] == ["gpu:1"]
    pool.slots[1].retired = True
    with pytest.raises(PoolExhausted, match="taken out of the pool"):
        await pool.run(job)


def _gpu(name: str) -> DeviceInfo:
    return DeviceInfo(kind="cuda", name=name, torch_version="2.13.0", capability="9.0")


def test_a_gpu_set_that_mixes_models_is_refused_with_the_indices_to_use() -> None:
    gpus = [_gpu("NVIDIA H100 80GB HBM3"), _gpu("NVIDIA A100-SXM4-40GB"), _gpu("NVIDIA H100 80GB HBM3")]
    with pytest.raises(EvaluatorError, match=r"mixes GPU models .* --gpus 0,2"):
        choose_gpus(parse_gpus("all"), gpus, [0, 1, 2])
    chosen = choose_gpus(parse_gpus("0,2"), gpus, visible_physical({"CUDA_VISIBLE_DEVICES": "4,5,6"}, 3))
    assert chosen.model.name == "NVIDIA H100 80GB HBM3" and chosen.physical == (4, 6)
    with pytest.raises(EvaluatorError, match="shows 3"):
        choose_gpus((3,), gpus, [0, 1, 2])
