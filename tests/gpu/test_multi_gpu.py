"""Every GPU of a host, with faults: the pool's promises checked on real GPUs (issue 41).

tests/scale/test_local_pool.py proves the same promises with two CPU workers standing in for GPUs;
here they are real devices, so what only a GPU can do is covered too: a kernel that faults its
context (an illegal address) and one that never ends must cost their own attempt and nothing more.
One evaluator over every visible GPU serves the whole module:
- evaluations side by side land on every GPU, never two at once on one;
- a trusted worker SIGKILLed during timing is retried on another GPU and the verdict lands;
- after a faulting and a hanging candidate, every GPU still passes an honest candidate at its speed.

Skipped below two GPUs. Run on a multi-GPU machine: ``python3 -m pytest tests/gpu/test_multi_gpu.py
-m gpu -s -n 0``.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.evaluator.host.slot_pool import Lease
from stark_mcp.problems import load_problem
from stark_mcp.records import Evaluation, Status

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.anyio,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA devices"
    ),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cuda"
SETTINGS = EvalSettings(
    trials=2,
    baselines=("eager",),
    build_timeout_s=300.0,
    load_timeout_s=120.0,
    correctness_timeout_s=20.0,  # the hanging candidate costs exactly this much device time
    timing_timeout_s=60.0,
    baseline_timeout_s=120.0,
    max_time_s=0.5,
    profile=False,
    sanitize=False,
)


def _source(name: str, salt: str) -> str:
    # Another source hash for each call: a separate evaluation, never a result-cache hit.
    return (FIXTURES / name).read_text(encoding="utf-8") + f"\n# multi-gpu {salt}\n"


def _overlap(a: Lease, b: Lease) -> bool:
    return a.started < b.ended and b.started < a.ended


def _text(ev: Evaluation) -> str:
    return f"{ev.status.value}/{ev.reason}: {ev.message[:400]}"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def every_gpu(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Evaluator]:
    cache = tmp_path_factory.mktemp("multi-gpu") / "cache"
    async with Evaluator(cache, SETTINGS, gpus="all") as ev:
        yield ev


@pytest.fixture(scope="module")
def problem():  # noqa: ANN201 - a Problem
    return load_problem(str(FIXTURES / "problem_relu_add.py"))


async def test_side_by_side_on_every_gpu_never_two_on_one(every_gpu: Evaluator, problem) -> None:  # noqa: ANN001
    gpus = await every_gpu.slots("cuda")
    assert gpus == torch.cuda.device_count()
    pool = await every_gpu.worker_pool("cuda")
    pool.history.clear()
    results = await asyncio.gather(
        *(
            every_gpu.evaluate(problem, _source("cand_relu_add_torch.py", f"spread {n}"), device="cuda")
            for n in range(2 * gpus)
        )
    )
    assert [r.status for r in results] == [Status.PASSED] * len(results), [_text(r) for r in results]
    leases = [lease for lease in pool.history if lease.outcome == "ok"]
    assert {lease.slot for lease in leases} == {slot.label for slot in pool.slots}, leases
    for i, a in enumerate(leases):
        for b in leases[i + 1 :]:
            if a.slot == b.slot:
                assert not _overlap(a, b), f"two timings at once on {a.slot}: {a} {b}"


async def test_a_worker_killed_in_timing_is_retried_on_another_gpu(every_gpu: Evaluator, problem) -> None:  # noqa: ANN001
    pool = await every_gpu.worker_pool("cuda")
    pool.history.clear()
    killed: list[str] = []

    async def kill_in_timing(_done: float, _total: float | None, message: str) -> None:
        if message == "timing" and not killed:
            busy = next(s for s in pool.slots if s.busy)
            assert busy.handle.proc is not None
            os.kill(busy.handle.proc.pid, signal.SIGKILL)
            killed.append(busy.label)

    result = await every_gpu.evaluate(
        problem, _source("cand_relu_add_fused.py", "killed"), device="cuda", progress=kill_in_timing
    )
    assert killed, "the evaluation never reached its timing phase"
    assert result.status is Status.PASSED, _text(result)
    outcomes = [(lease.slot, lease.outcome) for lease in pool.history]
    assert (killed[0], "fault") in outcomes, outcomes
    assert outcomes[-1][1] == "ok" and outcomes[-1][0] != killed[0], outcomes
    # One fault is not a retirement: the GPU whose worker died serves again with a fresh worker.
    assert all(not slot.retired for slot in pool.slots)


async def test_a_faulting_and_a_hanging_kernel_cost_their_attempt_only(every_gpu: Evaluator, problem) -> None:  # noqa: ANN001
    pool = await every_gpu.worker_pool("cuda")
    honest = await every_gpu.evaluate(problem, _source("cand_relu_add_fused.py", "before"), device="cuda")
    assert honest.status is Status.PASSED and honest.runtime is not None, _text(honest)
    bad, hang = await asyncio.gather(
        every_gpu.evaluate(problem, _source("cand_relu_add_illegal_access.py", "fault"), device="cuda"),
        every_gpu.evaluate(problem, _source("cand_relu_add_infinite_loop.py", "hang"), device="cuda"),
    )
    assert bad.status is Status.RUNTIME_ERROR, _text(bad)
    assert hang.status is Status.TIMEOUT, _text(hang)
    assert all(not slot.retired for slot in pool.slots), "a candidate's fault retired a GPU"
    # Every GPU, including those that ran the fault and the hang, passes the honest kernel at speed.
    pool.history.clear()
    after = await asyncio.gather(
        *(
            every_gpu.evaluate(problem, _source("cand_relu_add_fused.py", f"after {n}"), device="cuda")
            for n in range(2 * len(pool.slots))
        )
    )
    for ev in after:
        assert ev.status is Status.PASSED and ev.runtime is not None, _text(ev)
        assert ev.runtime.median_ms <= 2.0 * honest.runtime.median_ms, (ev.runtime, honest.runtime)
    assert {lease.slot for lease in pool.history if lease.outcome == "ok"} == {s.label for s in pool.slots}


async def test_mcp_clients_in_parallel_across_gpus_keep_their_trees_and_budgets(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Two MCP clients on one server (one database, every GPU), each driving its own run with more
    add_child calls in flight than its budget: every attempt lands in its own tree, each run records
    exactly its budget."""
    from mcp import Client

    from stark_mcp.config import Settings
    from stark_mcp.server import build_server

    home = tmp_path_factory.mktemp("multi-gpu-mcp")
    server = build_server(Settings(home=home, gpus="all"), eval_settings=SETTINGS)
    budget, submitted = 3, 5
    problem_path = str(FIXTURES / "problem_relu_add.py")
    async with Client(server, mode="auto") as first, Client(server, mode="auto") as second:
        runs: dict[str, Client] = {}
        for client in (first, second):
            made = await client.call_tool(
                "create_run", {"problem": problem_path, "budget": budget, "device": "cuda"}
            )
            assert not made.is_error, made
            runs[made.structured_content["run_id"]] = client
        salts: dict[str, set[str]] = {run_id: set() for run_id in runs}
        answers: list[tuple[str, object]] = []

        async def attempt(run_id: str, client: Client, n: int) -> None:
            salt = f"{run_id} {n}"
            salts[run_id].add(salt)
            answers.append(
                (
                    run_id,
                    await client.call_tool(
                        "add_child",
                        {
                            "run_id": run_id,
                            "parent_id": "n0",
                            "source": _source("cand_relu_add_torch.py", salt),
                        },
                    ),
                )
            )

        await asyncio.gather(*(attempt(r, c, n) for r, c in runs.items() for n in range(submitted)))
        for run_id, client in runs.items():
            recorded = [a for r, a in answers if r == run_id and not a.is_error]
            assert len(recorded) == budget, [a for r, a in answers if r == run_id]
            assert all(a.structured_content["status"] == "passed" for a in recorded), recorded
            tree = await client.call_tool("list_runs", {})
            attempts = {r["run_id"]: r["attempts"] for r in tree.structured_content["runs"]}
            assert attempts[run_id] == budget
            for a in recorded:
                node = await client.call_tool(
                    "get_node", {"run_id": run_id, "node_id": a.structured_content["node_id"]}
                )
                # The node holds one of this run's own sources, not the other client's.
                held = node.structured_content["source"]
                assert any(f"# multi-gpu {salt}" in held for salt in salts[run_id])
