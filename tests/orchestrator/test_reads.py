"""The read side keeps each run's tree in memory; two services on one database (as two server
processes are) still see each other's attempts at their next read, and share one budget."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stark_mcp.evaluator import Evaluator
from stark_mcp.orchestrator.errors import BudgetExhausted
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.problems import problem_from_source, source_hash
from stark_mcp.records import Evaluation, Status, TimingStats
from stark_mcp.store import Store
from tests.toolchain import shared_toolchain

from .conftest import FAST
from .replies import CLAMPED, FUSED, PROBLEM, WHERE, WRONG

pytestmark = pytest.mark.anyio


def timed(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, samples=5)


def passed(ms: float) -> Evaluation:
    return Evaluation(status=Status.PASSED, runtime=timed(ms), baselines={"eager": timed(1.0)},
                      speedups={"eager": 1.0 / ms}, device="cpu")


@pytest.fixture
async def two(db_path: Path, eval_cache: Path) -> AsyncIterator[tuple[RunService, RunService]]:
    # Two connections and two caches on one file, as two `stark-mcp serve` processes would have.
    async with (
        await Store.open(db_path) as first_store, await Store.open(db_path) as second_store,
        Evaluator(eval_cache, settings=FAST, toolchain_dir=shared_toolchain()) as evaluator,
    ):
        yield RunService(first_store, evaluator), RunService(second_store, evaluator)


async def record(service: RunService, run_id: str, parent: str, source: str, evaluation: Evaluation) -> str:
    """add_child reusing a stored evaluation: the path an MCP host takes after evaluate_kernel."""
    stored = await service.store.save_evaluation(run_id, source_hash(source), evaluation)
    node = await service.add_child(run_id, parent, source, action="debug", evaluation_id=stored.id)
    return node.id


async def test_each_service_sees_the_others_attempts_at_its_next_read(
    two: tuple[RunService, RunService],
) -> None:
    first, second = two
    run = await first.store.create_run(
        problem=problem_from_source(PROBLEM, name="scaled_relu"), device="cpu", policy={"name": "stark"},
        budget=4, seed=5, root_evaluation=passed(1.0),
    )
    assert len(await first.tree(run.id)) == len(await second.tree(run.id)) == 1  # both trees now cached

    assert await record(first, run.id, "n0", FUSED, passed(0.5)) == "n1"
    assert [n.id for n in await second.tree(run.id)] == ["n0", "n1"]
    assert (await second.best(run.id)).id == "n1"  # type: ignore[union-attr]
    assert await record(second, run.id, "n1", CLAMPED, passed(0.25)) == "n2"
    assert [e.node_id for e in await first.leaderboard(run.id)] == ["n2", "n1"]
    assert (await first.node(run.id, "n2")).parent_id == "n1"
    assert await first.attempts_left(run.id) == await second.attempts_left(run.id) == 2

    await record(first, run.id, "n2", WRONG, Evaluation(status=Status.WRONG_OUTPUT))
    assert await record(second, run.id, "n0", WHERE, passed(0.75)) == "n4"
    with pytest.raises(BudgetExhausted):
        await record(first, run.id, "n0", WHERE + "# again\n", passed(0.75))
    assert [n.id for n in await first.tree(run.id)] == ["n0", "n1", "n2", "n3", "n4"]
    assert (await second.get_run(run.id)).status == "finished"
