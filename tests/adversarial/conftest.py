from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator

# Short budgets: each case is judged on correctness calls plus a brief interleaved timing loop.
SUITE = EvalSettings(
    baselines=("eager",),
    trials=3,
    min_calls=20,
    min_time_s=0.005,
    max_time_s=0.2,
    correctness_timeout_s=30.0,
    timing_timeout_s=60.0,
    load_timeout_s=90.0,
    build_timeout_s=300.0,
)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def suite_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stark-adversarial-cache")


@pytest.fixture(scope="session")
async def suite_evaluator(suite_cache: Path):
    async with Evaluator(suite_cache, SUITE) as ev:
        yield ev
