from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from tests.toolchain import shared_toolchain

# Short budgets: each case is judged on correctness calls plus a brief interleaved timing loop. Not
# shorter than 40 calls: the honest controls' check compares two medians to ~0.1 ms on a 2-core VM
# (tools/cpu_timing_noise.py: an honest C++ kernel was flagged in 4 of 32 evaluations at 20 calls,
# 0 of 20 at 40), and the calls cost ~1 ms each.
SUITE = EvalSettings(
    baselines=("eager",),
    trials=3,
    min_calls=40,
    min_time_s=0.005,
    max_time_s=0.2,
    correctness_timeout_s=30.0,
    timing_timeout_s=60.0,
    load_timeout_s=90.0,
    build_timeout_s=300.0,
    jail_memory_bytes=1 << 30,  # the memory hoarders need no more than this to reach it
)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def suite_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stark-adversarial-cache")


@pytest.fixture(scope="session")
async def suite_evaluator(suite_cache: Path):
    async with Evaluator(suite_cache, SUITE, toolchain_dir=shared_toolchain()) as ev:
        yield ev
