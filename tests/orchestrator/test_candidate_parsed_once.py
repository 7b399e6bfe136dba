"""A candidate's source is parsed once on its way from where it comes in to its verdict.

The entries are the real ones on the CPU evaluator: ``RunService.add_child`` (MCP ``add_child``),
``RunService.evaluate`` (``evaluate_kernel``), the headless loop's evaluate-then-record, and
``evaluate_on`` (``stark-mcp eval``). Each source is new to the shared result cache (a token in a
comment), so the evaluator's own static check runs too; ``ast.parse`` is counted for that text.
"""

from __future__ import annotations

import ast
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from stark_mcp.evaluator import Evaluator
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.session import evaluate_on
from stark_mcp.problems import problem_from_source, source_hash
from stark_mcp.records import Status

from .conftest import FAST
from .replies import FUSED, PROBLEM

pytestmark = pytest.mark.anyio


class Parses:
    """``ast.parse`` calls per source text, in this process (the worker's own import is elsewhere)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def of(self, text: str) -> int:
        return sum(1 for seen in self.texts if seen == text)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[Parses]:
    counted = Parses()
    real = ast.parse

    def parse(source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(source, str):
            counted.texts.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse)
    yield counted


def fresh(source: str) -> str:
    """``source`` made new to every cache, the same program."""
    return source + f"# {secrets.token_hex(8)}\n"


async def _run(service: RunService) -> str:
    run, _ = await service.create_run(
        problem_from_source(PROBLEM, name="scaled_relu"), device="cpu", budget=5, seed=3
    )
    return run.id


async def test_add_child_parses_its_source_once(service: RunService, parses: Parses) -> None:
    run_id = await _run(service)
    source = fresh(FUSED)
    node = await service.add_child(run_id, "n0", source)
    assert node.evaluation is not None and node.evaluation.status is Status.PASSED, node.evaluation
    assert not node.evaluation.cached  # the evaluator checked it too, on the same parse
    assert parses.of(source) == 1
    # a syntax error is a verdict from that one parse as well
    broken = fresh(FUSED.replace("return torch.relu(x)", "return torch.relu(x"))
    node = await service.add_child(run_id, "n0", broken, action="debug")
    assert node.evaluation is not None and node.evaluation.reason == "syntax"
    assert parses.of(broken) == 1


async def test_evaluate_kernel_then_the_loops_record_parse_once(service: RunService, parses: Parses) -> None:
    run_id = await _run(service)
    source = fresh(FUSED)
    stored = await service.evaluate(run_id, source)
    assert stored.evaluation.passed and stored.source_hash == source_hash(source)
    assert parses.of(source) == 1
    # the headless loop hands the same Candidate to both calls: evaluated once, recorded, one parse
    looped = fresh(FUSED)
    candidate = Candidate(looped)
    stored = await service.evaluate(run_id, candidate)
    node = await service.add_child(run_id, "n0", candidate, evaluation_id=stored.id)
    assert node.evaluation == stored.evaluation and node.source == looped
    assert parses.of(looped) == 1


async def test_eval_parses_its_source_once(module_evaluator: Evaluator, parses: Parses) -> None:
    source = fresh(FUSED)
    evaluation = await evaluate_on(
        module_evaluator, problem_from_source(PROBLEM, name="scaled_relu"), source, device="cpu",
        eval_settings=FAST,
    )
    assert evaluation.passed and not evaluation.cached, evaluation.message
    # the cache key is the source's own hash, as before a Candidate carried it
    assert evaluation.source_hash == source_hash(source) == Candidate(source).hash
    assert parses.of(source) == 1
