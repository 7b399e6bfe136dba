from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.store import Store
from tests.toolchain import shared_toolchain

# Small timing budgets: each fresh evaluation is a few seconds of process start-up on the CPU.
FAST = EvalSettings(
    baselines=("eager",), trials=2, warmup_s=0.0, min_calls=3, min_time_s=0.0, max_time_s=0.05, input_sets=1
)
FAST_JSON = FAST.model_dump_json()


# Module scope, so one evaluator (its worker, kept warm) serves a module's tests, as it serves a
# server's sessions; each test still has its own store.
@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def eval_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One evaluator cache for the session: a source evaluated once is a cache hit afterwards."""
    return tmp_path_factory.mktemp("eval-cache")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "stark.db"


@pytest.fixture(scope="module")
async def module_evaluator(eval_cache: Path) -> AsyncIterator[Evaluator]:
    async with Evaluator(eval_cache, settings=FAST, toolchain_dir=shared_toolchain()) as evaluator:
        yield evaluator


@pytest.fixture
async def service(db_path: Path, module_evaluator: Evaluator) -> AsyncIterator[RunService]:
    async with await Store.open(db_path) as store:
        service = RunService(store, module_evaluator)
        try:
            yield service
        finally:
            await service.aclose()  # its background work ends with the test, not with the evaluator
