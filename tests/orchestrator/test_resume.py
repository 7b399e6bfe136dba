"""Kill a runner process mid-run with SIGKILL, resume the run, and lose or repeat nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stark_mcp.llm import ScriptedBackend
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.problems import problem_from_source

from .replies import CLAMPED, CRASH, FUSED, PROBLEM, WHERE, WRONG, code_reply, write_replies

pytestmark = pytest.mark.anyio

RUNNER = Path(__file__).parent / "runner.py"
SOURCES = [FUSED, WRONG, CLAMPED, CRASH, WHERE]


@pytest.mark.slow
async def test_resume_after_sigkill_loses_and_repeats_nothing(
    service: RunService, db_path: Path, eval_cache: Path, tmp_path: Path
) -> None:
    run, _ = await service.create_run(
        problem_from_source(PROBLEM, name="scaled_relu"), device="cpu", budget=len(SOURCES), seed=9,
        policy="sampling", strategy="sampling",
    )
    replies = write_replies(tmp_path / "replies.json", [("generalist", code_reply(s)) for s in SOURCES])
    runner = subprocess.Popen(
        [sys.executable, str(RUNNER), str(db_path), str(eval_cache), run.id, str(replies), "0.7"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while await service.store.count_nodes(run.id) < 2:
            assert runner.poll() is None, runner.stderr.read().decode() if runner.stderr else ""
            assert time.monotonic() < deadline, "the runner recorded fewer than 2 attempts in 90 s"
            await asyncio.sleep(0.1)
        os.killpg(runner.pid, signal.SIGKILL)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()

    before = await service.store.nodes(run.id)
    done = len(before) - 1
    assert 2 <= done < len(SOURCES), "kill the runner before it finishes"
    assert (await service.get_run(run.id)).status == "running"  # SIGKILL left no chance to say otherwise

    # The resumed session gets only the replies the killed one never used.
    backend = ScriptedBackend([code_reply(s) for s in SOURCES[done:]])
    summary = await run_search(service, run.id, backend)

    after = await service.store.nodes(run.id)
    assert [n.model_dump() for n in after[: len(before)]] == [n.model_dump() for n in before]
    assert [n.source for n in after[1:]] == SOURCES  # each attempt once, in order
    assert len(backend.requests) == len(SOURCES) - done and backend.pending == 0
    assert summary.status == "finished" and summary.new_attempts == len(SOURCES) - done
    for node in after[1:]:
        assert [e.role for e in await service.store.exchanges(run.id, node.id)] == ["generalist"]
