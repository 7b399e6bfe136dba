"""Runs left 'running' by a driver that is gone end 'interrupted': a process that died (its pid gone,
or reused by another process), a run nobody claimed, and a run whose MCP client hung up; a run of a
live process, or of another host's, is left alone."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from stark_mcp.orchestrator.owners import process_started, this_process
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Evaluation, RunOwner, Status, TimingStats
from stark_mcp.store import Store

from .support import PROBLEM, make_server, ok, source
from .test_roots import http_server

pytestmark = pytest.mark.anyio


def timed(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, samples=5)


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


async def running_run(store: Store, owner: RunOwner | None) -> str:
    run = await store.create_run(
        problem=problem_from_source(PROBLEM.read_text(), name="relu"), device="cpu", policy={"name": "stark"},
        budget=3, seed=1, baselines={"eager": timed(1.0)},
        root_evaluation=Evaluation(status=Status.PASSED, runtime=timed(1.0), device="cpu"),
    )
    if owner is not None:
        await store.claim_run(run.id, owner)
    await store.update_run(run.id, status="running")
    return run.id


async def statuses(client: Client) -> dict[str, str]:
    return {run["run_id"]: run["status"] for run in ok(await client.call_tool("list_runs"))["runs"]}


async def test_a_server_that_starts_interrupts_the_runs_whose_driver_is_gone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dead, alive = sleeper(), sleeper()
    try:
        dead_owner, alive_owner = (
            this_process().model_copy(update={"pid": p.pid, "started": process_started(p.pid)})
            for p in (dead, alive)
        )
        dead.kill()
        dead.wait()
        async with await Store.open(home / "stark.db") as store:
            runs = {
                "dead": await running_run(store, dead_owner),
                "alive": await running_run(store, alive_owner),
                # The live process's pid with another start time: the pid was reused.
                "reused": await running_run(store, alive_owner.model_copy(update={"started": "1"})),
                "unclaimed": await running_run(store, None),
                "closed session": await running_run(store, this_process("mcp-closed")),
                "other host": await running_run(store, dead_owner.model_copy(update={"host": "elsewhere"})),
            }
        async with Client(make_server(home)) as client:
            seen = await statuses(client)
        assert {name: seen[run_id] for name, run_id in runs.items()} == {
            "dead": "interrupted", "alive": "running", "reused": "interrupted", "unclaimed": "interrupted",
            "closed session": "interrupted", "other host": "running",
        }
    finally:
        alive.kill()
        alive.wait()


@pytest.mark.slow  # evaluates
async def test_a_run_driven_by_a_client_that_hung_up_is_interrupted(tmp_path: Path) -> None:
    server = make_server(tmp_path / "home")
    async with Client(server) as first:
        spec = {"problem": str(PROBLEM), "budget": 3, "device": "cpu"}
        run_id = ok(await first.call_tool("create_run", spec))["run_id"]
        child = {"run_id": run_id, "parent_id": "n0", "source": source("cand_clamp")}
        ok(await first.call_tool("add_child", child))
        async with Client(server) as watcher:
            assert (await statuses(watcher))[run_id] == "running"
    await asyncio.sleep(0)
    async with Client(server) as second:
        assert (await statuses(second))[run_id] == "interrupted"
        # Driving it again makes it running again, this session's now.
        ok(await second.call_tool("add_child", {**child, "source": source("cand_where")}))
        assert (await statuses(second))[run_id] == "running"


@pytest.mark.slow  # a server process, evaluates
async def test_over_http_a_session_that_ends_leaves_its_runs_interrupted(tmp_path: Path) -> None:
    # Stateful sessions are the handshake era's; per-request clients have none to end (docs/mcp.md).
    port, process = http_server(tmp_path, tmp_path / "home", PROBLEM.parent)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with Client(streamable_http_client(url), mode="legacy") as first:
            spec = {"problem": str(PROBLEM), "budget": 3, "device": "cpu"}
            run_id = ok(await first.call_tool("create_run", spec))["run_id"]
            child = {"run_id": run_id, "parent_id": "n0", "source": source("cand_clamp")}
            ok(await first.call_tool("add_child", child))
            async with Client(streamable_http_client(url), mode="legacy") as watcher:
                assert (await statuses(watcher))[run_id] == "running"
        # The first client's exit ended its session (DELETE); the server released its run.
        async with Client(streamable_http_client(url), mode="legacy") as second:
            for _ in range(50):
                if (await statuses(second))[run_id] == "interrupted":
                    break
                await asyncio.sleep(0.1)
            assert (await statuses(second))[run_id] == "interrupted"
    finally:
        process.terminate()
        process.wait(timeout=20)
