from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stark_mcp.problems import Problem
from stark_mcp.records import Action, RunRecord
from stark_mcp.store import Store

from .helpers import PROBLEM_SOURCE


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "stark.db"


@pytest.fixture
def problem() -> Problem:
    return Problem(name="tanh_double", source=PROBLEM_SOURCE, origin="tests/store", level=1, problem_id=7)


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(db_path) as opened:
        yield opened


@pytest.fixture
async def run(store: Store, problem: Problem) -> RunRecord:
    return await store.create_run(
        problem=problem, device="cpu", policy={"name": "stark", "eps": 0.3}, budget=10, seed=3
    )


@pytest.fixture
async def root_run(store: Store, run: RunRecord) -> RunRecord:
    """A run whose root n0 is recorded."""
    await store.add_node(run.id, parent_id=None, action=Action.ROOT, source=PROBLEM_SOURCE)
    return run
