"""Runs ``run_search`` on an existing run in its own process, slowly, so a test can kill it mid-run.

usage: python runner.py DB CACHE RUN_ID REPLIES_JSON DELAY_S
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from stark_mcp.evaluator import Evaluator
from stark_mcp.llm import LLMReply, LLMRequest, ScriptedBackend
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.store import Store


class SlowBackend:
    """The scripted replies, each after ``delay`` seconds, like a model that takes its time."""

    name = "slow-scripted"

    def __init__(self, script: ScriptedBackend, delay: float) -> None:
        self.script = script
        self.delay = delay

    async def complete(self, request: LLMRequest) -> LLMReply:
        await asyncio.sleep(self.delay)
        return await self.script.complete(request)


async def main(db: str, cache: str, run_id: str, replies: str, delay: str) -> None:
    backend = SlowBackend(ScriptedBackend.from_file(replies), float(delay))
    async with await Store.open(db) as store, Evaluator(Path(cache)) as evaluator:
        await run_search(RunService(store, evaluator), run_id, backend)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
