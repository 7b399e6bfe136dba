from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.problems import load_problem
from stark_mcp.records import Evaluation
from tests.toolchain import shared_toolchain

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"

# Quick but faithful: five secret-seeded trials, the real timer, only the eager baseline.
FAST = EvalSettings(baselines=("eager",), min_time_s=0.005, max_time_s=0.3, correctness_timeout_s=30.0,
                    load_timeout_s=60.0, build_timeout_s=300.0)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the whole session, so each C++ source is built at most once."""
    return tmp_path_factory.mktemp("stark-eval-cache")


@pytest.fixture(scope="session")
async def evaluator(cache_dir: Path):
    """One warm evaluator (worker, baseline runners, spare runner) shared by the evaluator tests."""
    async with Evaluator(cache_dir, FAST, toolchain_dir=shared_toolchain()) as ev:
        yield ev


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


async def evaluate_fixture(ev: Evaluator, problem: str, candidate: str, settings: EvalSettings = FAST,
                           **kwargs: object) -> Evaluation:
    return await ev.evaluate(load_problem(str(FIXTURES / problem)), fixture_text(candidate), device="cpu",
                             settings=settings, **kwargs)  # type: ignore[arg-type]
