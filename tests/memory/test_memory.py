"""Memory across runs: lessons written when a run uses its budget (real evaluations on the CPU, a
real SQLite file), read by a later similar problem's plan prompt, and the memory commands."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stark_mcp.cli import app
from stark_mcp.evaluator import Evaluator
from stark_mcp.memory import MemoryEntry, lesson_of, op_signature, rank, render_entries
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Evaluation, Node, RunRecord, Status, TimingStats
from stark_mcp.store import Store
from tests.orchestrator.conftest import FAST
from tests.server.support import FIXTURES, anchored_plan, source
from tests.toolchain import shared_toolchain

RELU = (FIXTURES / "problem_relu_scale.py").read_text()
MATMUL = (FIXTURES / "problem_matmul_small.py").read_text()
# Another problem with relu in it: similar to RELU, not to MATMUL.
RELU_ADD = RELU.replace("return torch.relu(x) * self.scale", "return torch.relu(x) + self.scale")
ADVICE = "Replace relu and the multiply with one clamp_min."
SECTION = "What worked on similar problems"


def test_the_signature_is_the_operators_the_reference_names() -> None:
    conv = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv3d(3, 8, 3)\n\n    def forward(self, x):\n"
        "        y = F.gelu(self.conv(x))\n        return torch.logsumexp(y, dim=1).sum()\n"
    )
    assert op_signature(conv) == {"conv3d", "gelu", "logsumexp", "sum"}
    assert op_signature(RELU) == {"relu"} and op_signature(MATMUL) == {"mm"}
    assert op_signature("def broken(:\n") == frozenset()


def test_ranking_by_overlap_then_speedup() -> None:
    def entry(run_id: str, ops: list[str], speedup: float | None) -> MemoryEntry:
        return MemoryEntry(run_id=run_id, problem_name=run_id, problem_hash="h", ops=ops, transformation="t",
                           speedup=speedup)

    entries = [entry("a", ["relu", "mm"], 1.5), entry("b", ["relu"], 3.0), entry("c", ["relu"], 2.0),
               entry("d", ["conv3d"], 9.0), entry("e", ["relu"], 5.0)]
    ranked = rank(entries, RELU, k=3, exclude_run="e")
    assert [e.run_id for e in ranked] == ["b", "c", "a"]  # jaccard 1, 1 (by speedup), 0.5; d shares nothing


def test_a_lesson_keeps_the_plans_that_beat_the_best_so_far_and_distinct_pitfalls() -> None:
    def timed(ms: float) -> TimingStats:
        return TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, samples=3)

    def node(i: int, plan: str | None, evaluation: Evaluation | None) -> Node:
        return Node(id=f"n{i}", seq=i, parent_id="n0", action=Action.PLAN, plan=plan, source="x",
                    evaluation=evaluation)

    def passed(speedup: float) -> Evaluation:
        return Evaluation(status=Status.PASSED, runtime=timed(1 / speedup), speedups={"eager": speedup})

    wrong = Evaluation(status=Status.WRONG_OUTPUT, message="\noutput 0 differs: rel error 0.3\nmore")
    run = RunRecord(id="r-1", name="r", problem=problem_from_source(RELU, name="relu_scale"), device="cpu",
                    policy={}, budget=5, seed=0, created_at=0.0, updated_at=0.0)
    nodes = [
        Node(id="n0", action=Action.ROOT, source=RELU, evaluation=passed(1.0)),
        node(1, "## Advice\nslower try\n", passed(0.8)),
        node(2, "## Advice\nfuse the scale\n", passed(1.5)),
        node(3, "## Advice\nsame again\n", passed(1.2)),
        node(4, "## Advice\nvectorize\n", passed(2.5)),
        node(5, None, wrong),
        node(6, None, wrong),
    ]
    lesson = lesson_of(run, nodes, now=7.0)
    assert lesson is not None and lesson.speedup == 2.5 and lesson.ops == ["relu"]
    assert lesson.transformation == "fuse the scale (1.50x) Then: vectorize (2.50x)"
    assert lesson.pitfalls == ["wrong_output: output 0 differs: rel error 0.3"]
    assert "vectorize" in render_entries([lesson]) and lesson_of(run, nodes[:1], now=0.0) is None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def evaluator(tmp_path: Path) -> AsyncIterator[Evaluator]:
    async with Evaluator(tmp_path / "cache", settings=FAST, toolchain_dir=shared_toolchain()) as ev:
        yield ev


@pytest.mark.slow  # real evaluations
@pytest.mark.anyio
async def test_a_finished_run_teaches_a_later_similar_problem(tmp_path: Path, evaluator: Evaluator) -> None:
    db = tmp_path / "home" / "stark.db"
    db.parent.mkdir()
    async with await Store.open(db) as store:
        service = RunService(store, evaluator, memory=True)
        try:
            relu = problem_from_source(RELU, name="relu_scale")
            run, _root = await service.create_run(relu, device="cpu", budget=2)
            plan = anchored_plan(RELU)
            good = await service.add_child(run.id, "n0", source("cand_clamp"), plan=plan)
            assert good.evaluation is not None and good.evaluation.passed
            assert await service.memories() == []  # not before the run has used its budget
            await service.add_child(run.id, "n0", source("cand_wrong"), plan=plan)
            (lesson,) = await service.memories()
            assert lesson.run_id == run.id and lesson.ops == ["relu"]
            assert lesson.pitfalls and lesson.pitfalls[0].startswith("wrong_output")
            speedup = good.evaluation.speedups["eager"]
            assert lesson.speedup == pytest.approx(speedup)
            if speedup > 1.0:  # a transformation is kept only when it beat eager
                assert ADVICE in lesson.transformation

            relu_add = problem_from_source(RELU_ADD, name="relu_add")
            similar, _ = await service.create_run(relu_add, device="cpu", budget=2)
            prompt = (await service.build_context(similar.id, "n0", "plan")).text
            assert SECTION in prompt and "relu_scale" in prompt and "pitfall: wrong_output" in prompt
            assert SECTION not in (await service.build_context(similar.id, "n0", "debug")).text
            mm = problem_from_source(MATMUL, name="mm")
            other, _ = await service.create_run(mm, device="cpu", budget=2)
            assert SECTION not in (await service.build_context(other.id, "n0", "plan")).text
            # Its own lesson is never shown to the run that wrote it, and memory off shows none.
            assert SECTION not in (await service.build_context(run.id, "n0", "plan")).text
            service.memory = False
            assert SECTION not in (await service.build_context(similar.id, "n0", "plan")).text
        finally:
            await service.aclose()


def test_the_memory_commands_list_export_and_clear(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    entry = MemoryEntry(run_id="r-kept1", problem_name="relu_scale", problem_hash="h", ops=["relu"],
                        transformation="fuse (2.00x)", speedup=2.0, created_at=1.0)

    async def keep() -> None:
        async with await Store.open(home / "stark.db") as store:
            await store.save_memory(entry.run_id, entry.problem_hash, entry.model_dump_json(), 1.0)

    asyncio.run(keep())
    runner = CliRunner(env={"STARK_HOME": str(home), "STARK_DB_PATH": None})
    listed = runner.invoke(app, ["memory", "list"])
    assert listed.exit_code == 0, listed.output
    assert "r-kept1  relu_scale  2.00x  ops: relu" in listed.output
    exported = runner.invoke(app, ["memory", "export", "--out", str(tmp_path / "memory.json")])
    assert exported.exit_code == 0, exported.output
    (row,) = json.loads((tmp_path / "memory.json").read_text())
    assert MemoryEntry.model_validate(row) == entry
    cleared = runner.invoke(app, ["memory", "clear"])
    assert cleared.exit_code == 0 and "forgot 1 lesson" in cleared.output, cleared.output
    assert "no lessons kept yet" in runner.invoke(app, ["memory", "list"]).output
