"""Cancelling a worker's command kills the worker, even when the cancel lands on the event-loop turn
in which the worker's next frame arrives (the race behind a cancelled MCP call whose candidate lived
on: Python 3.11's ``asyncio.wait_for`` returned the frame and dropped the cancel)."""

from __future__ import annotations

import asyncio
import json
import os
import struct

import pytest

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.host.worker_handles import WorkerClient

pytestmark = pytest.mark.anyio


def frame(payload: dict[str, object]) -> bytes:
    data = json.dumps(payload).encode()
    return struct.pack(">I", len(data)) + data


def sent(commands: int) -> bool:
    try:
        return bool(os.read(commands, 1 << 16))
    except BlockingIOError:
        return False


EVALUATE = wire.EvaluateCommand(
    id="x", key="k", settings=EvalSettings().worker_settings("cpu"),
    job=wire.Job(source_path="/nonexistent", build_dir=None, deferred=False, build_in_place=True),
)  # fmt: skip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the worker's client is asyncio code (its pipes are asyncio streams)


@pytest.mark.parametrize("arriving", ["progress", "partial"])
async def test_a_cancel_that_lands_with_the_workers_next_frame_kills_the_worker(arriving: str) -> None:
    # A stand-in for the worker: a process leading its own session, as a real one does.
    stand_in = await asyncio.create_subprocess_exec("sleep", "300", start_new_session=True)
    commands_r, commands_w = os.pipe()
    os.set_blocking(commands_r, False)
    client = WorkerClient("cpu", None, hidden=[])
    client.proc, client._in_w = stand_in, commands_w
    client._reader = asyncio.StreamReader()
    seen: list[wire.Progress] = []

    async def on_progress(progress: wire.Progress) -> None:
        seen.append(progress)

    task = asyncio.ensure_future(
        client.command(EVALUATE, expect={wire.Result}, timeout=120, on_progress=on_progress)
    )
    try:
        while not sent(commands_r):  # the command went out: it now awaits the answer
            await asyncio.sleep(0)
        for _ in range(5):
            await asyncio.sleep(0)
        data = frame(wire.Progress(id="x", phase="correctness").to_frame())
        # The whole frame, or only its header: either way the read in progress completes on the turn
        # the cancel arrives.
        client._reader.feed_data(data if arriving == "progress" else data[:4])
        task.cancel()
        await asyncio.wait([task], timeout=15)  # waits without cancelling it again
        assert task.done(), f"the cancel was lost: the command still waits for the worker ({seen})"
        assert task.cancelled()
        assert stand_in.returncode is not None, "the worker outlived its cancelled command"
        assert client.proc is None
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=15)
        if stand_in.returncode is None:
            stand_in.kill()
            await stand_in.wait()
        os.close(commands_r)
        await asyncio.sleep(0.05)  # the exit's callbacks close the process's transport on this loop
