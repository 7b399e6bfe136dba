"""Two clients on one run at once, and cancellation killing an evaluation's processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from .support import MODES, PROBLEM, error_text, make_server, ok, processes_named, sleeper, source

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data directory for the module, so the baselines are timed once."""
    return tmp_path_factory.mktemp("concurrency-home")


async def test_two_clients_share_one_run(home: Path) -> None:
    server = make_server(home)
    results: dict[str, object] = {}
    async with Client(server, mode="auto") as first, Client(server, mode="legacy") as second:
        run_id = ok(await first.call_tool("create_run", {"problem": str(PROBLEM), "budget": 1}))["run_id"]
        assert (await second.call_tool("select_node",
            {"run_id": run_id})).structured_content["node_id"] == "n0"

        async def attempt(client: Client, name: str) -> None:
            results[name] = await client.call_tool(
                "add_child", {"run_id": run_id, "parent_id": "n0", "source": source(name)}
            )

        async with anyio.create_task_group() as group:
            group.start_soon(attempt, first, "cand_clamp")
            group.start_soon(attempt, second, "cand_where")

        outcomes = sorted(results.values(), key=lambda r: r.is_error)
        recorded, refused = outcomes
        assert not recorded.is_error and recorded.structured_content["status"] == "passed"
        assert "budget of 1" in error_text(refused)

        for client in (first, second):
            board = ok(await client.call_tool("leaderboard", {"run_id": run_id}))["entries"]
            assert [e["node_id"] for e in board] == [recorded.structured_content["node_id"]]
            runs = ok(await client.call_tool("list_runs"))["runs"]
            assert [r["attempts"] for r in runs if r["run_id"] == run_id] == [1]


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def lineage(pid: int) -> str:
    """State and name of ``pid`` and of each of its ancestors: says, when a candidate outlives its
    cancelled call, whether it is a zombie nobody reaps or a live process whose jail was not killed."""
    chain = []
    while pid > 1 and len(chain) < 8:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
            fields = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
        except OSError:
            chain.append(f"{pid} (gone)")
            break
        chain.append(f"{pid} {fields.get('Name', '?').strip()} [{fields.get('State', '?').strip()}]")
        pid = int(fields.get("PPid", "0").strip() or 0)
    return " <- ".join(chain)


def forked_processes() -> str:
    """Every process the zygotes forked (name, state, parent), for a failure to show which worker
    was still alive and which connection the surviving jail hung from."""
    rows = []
    for entry in Path("/proc").iterdir():
        try:
            fields = dict(
                line.split(":\t", 1) for line in (entry / "status").read_text().splitlines() if ":\t" in line
            )
        except (OSError, ValueError):
            continue
        name = fields.get("Name", "").strip()
        if name.startswith("stark-"):
            state, parent = fields.get("State", "?").strip(), fields.get("PPid", "?").strip()
            rows.append(f"{entry.name} {name} [{state}] <- {parent}")
    return "forked: " + ", ".join(sorted(rows))


@pytest.mark.parametrize("mode", MODES)
async def test_cancelling_evaluate_kernel_kills_its_process(home: Path, mode: str) -> None:
    server = make_server(home)
    marker = f"stark-sleep-{mode}"[:15]
    async with Client(server, mode=mode) as client:
        run_id = ok(await client.call_tool("create_run", {"problem": str(PROBLEM), "budget": 2}))["run_id"]
        with anyio.move_on_after(90) as scope:
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await client.call_tool("evaluate_kernel", {"run_id": run_id, "source": sleeper(marker)})

                group.start_soon(call)
                while not processes_named(marker):
                    await anyio.sleep(0.05)
                group.cancel_scope.cancel()
        assert not scope.cancelled_caught, "the candidate never reached its forward"
        pid = processes_named(marker)[0]
        deadline = time.monotonic() + 10
        while process_alive(pid) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert not process_alive(pid), (
            f"candidate process {pid} survived the cancelled call: {lineage(pid)}; {forked_processes()}"
        )
        # The client and the server stay usable, and nothing was recorded.
        runs = ok(await client.call_tool("list_runs"))["runs"]
        assert [r["attempts"] for r in runs if r["run_id"] == run_id] == [0]
