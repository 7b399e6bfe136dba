"""The benchmark runner in process: a broken problem, one process per folder, the status line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stark_mcp.bench import BenchError, BenchPlan, BenchSpec, plan_bench, run_bench
from stark_mcp.bench.files import open_manifest, read_results, run_document_path, write_results
from stark_mcp.bench.progress import BenchEvent, BenchProgressState, eta_seconds, format_duration
from stark_mcp.bench.rows import ResultRow
from stark_mcp.bench.runner import _exclusive
from stark_mcp.config import Settings
from stark_mcp.evaluator import EvalSettings
from stark_mcp.llm import ScriptedBackend
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.session import open_service
from stark_mcp.report.errors import ReportError
from stark_mcp.report.writer import write_bench_report

from .conftest import FAST
from .replies import PROBLEMS, RELU_FUSED, RELU_WRONG, SIG_OFF, SIG_PASS, code_reply

BROKEN = Path(__file__).resolve().parents[1] / "fixtures" / "cpu" / "problem_inputs_raise.py"

pytestmark = pytest.mark.anyio


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[RunService]:
    async with open_service(Settings(home=tmp_path / "home")) as opened:
        yield opened


def _plan(tmp_path: Path, problems: Path) -> BenchPlan:
    return plan_bench(
        BenchSpec(
            problems=str(problems),
            strategies=["sampling"],
            budget=1,
            device="cpu",
            out=tmp_path / "out",
            eval_settings=EvalSettings(baselines=("eager",), **FAST),
        )
    )


async def test_a_problem_whose_reference_fails_is_reported_and_the_benchmark_goes_on(
    service: RunService, tmp_path: Path
) -> None:
    folder = tmp_path / "problems"
    folder.mkdir()
    (folder / "no_inputs.py").write_text(BROKEN.read_text())
    events: list[BenchEvent] = []

    async def collect(event: BenchEvent) -> None:
        events.append(event)

    outcome = await run_bench(service, _plan(tmp_path, folder), ScriptedBackend(), progress=collect)
    assert [f.pair for f in outcome.failed] == ["no_inputs:sampling"]
    assert "could not start" in outcome.failed[0].message and "no inputs today" in outcome.failed[0].message
    assert (outcome.pairs, outcome.complete, outcome.ran) == (1, 0, 1)
    assert [e.kind for e in events] == ["started", "pair_started", "phase", "pair_failed", "finished"]
    assert read_results(tmp_path / "out") == []
    with pytest.raises(ReportError, match="nothing to report"):
        write_bench_report(tmp_path / "out")


async def test_a_second_benchmark_process_on_the_same_folder_is_refused(
    service: RunService, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with _exclusive(out), pytest.raises(BenchError, match="another stark-mcp bench is running in"):
        await run_bench(service, _plan(tmp_path, PROBLEMS), ScriptedBackend())


def test_the_status_line_extrapolates_the_eta_from_this_sessions_pace() -> None:
    event = BenchEvent(
        kind="pair_done",
        pair="1/1:stark",
        index=2,
        pairs=4,
        pairs_done=2,
        attempts_done=30,
        attempts_total=120,
        session_attempts=20,
        elapsed_s=600.0,
        cost_usd=1.25,
        best={"stark": 1.5, "sampling": 1.1},
    )
    assert eta_seconds(event) == pytest.approx(90 * 30.0)  # 90 attempts left at 30 s each
    line = BenchProgressState().apply(event).status_line()
    assert (
        line
        == "pairs 2/4 | attempts 30/120 | geomean vs eager: stark 1.50x sampling 1.10x | $1.2500 | ETA 45m00s"
    )
    assert eta_seconds(event.model_copy(update={"session_attempts": 0})) is None
    assert (format_duration(59.6), format_duration(61), format_duration(7322)) == ("1m00s", "1m01s", "2h02m")


async def test_resuming_against_another_database_is_refused_before_anything_is_rewritten(
    service: RunService, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, PROBLEMS)
    out = plan.spec.out
    out.mkdir()
    manifest = open_manifest(out, plan)
    row = ResultRow(
        bench_id=manifest.bench_id,
        pair="scaled_relu:sampling",
        key="scaled_relu",
        name="scaled_relu",
        level=None,
        problem_id=None,
        strategy="sampling",
        run_id="r-elsewhere",
        device="cpu",
        status="finished",
        complete=True,
        budget=1,
    )
    write_results(out, [row])
    with pytest.raises(BenchError, match=r"runs that are not in the database .*\(r-elsewhere\); resume with"):
        await run_bench(service, plan, ScriptedBackend())
    assert read_results(out) == [row]


async def test_cancelling_mid_pair_keeps_that_pairs_row_and_document(
    service: RunService, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, PROBLEMS).model_copy(deep=True)
    plan.pairs = plan.pairs[:1]  # scaled_relu:sampling alone
    plan.spec.budget = 2  # room to be cut short after its first attempt
    backend = ScriptedBackend([code_reply(RELU_WRONG), code_reply(RELU_FUSED)])
    task: asyncio.Task[object] | None = None

    async def cancel_after_the_first_attempt(event: BenchEvent) -> None:
        if event.search is not None and event.search.kind == "recorded":
            assert task is not None
            task.cancel()

    task = asyncio.ensure_future(run_bench(service, plan, backend, progress=cancel_after_the_first_attempt))
    with pytest.raises(asyncio.CancelledError):
        await task
    (row,) = read_results(plan.spec.out)
    assert (row.pair, row.status, row.complete, [a.status for a in row.attempts]) == (
        "scaled_relu:sampling",
        "interrupted",
        False,
        ["wrong_output"],
    )
    assert row.wall_s > 0 and run_document_path(plan.spec.out, row.run_id).exists()


async def test_pairs_run_side_by_side_and_each_gets_the_replies_tied_to_it(
    service: RunService, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, PROBLEMS).model_copy(deep=True)
    plan.spec.budget, plan.spec.pairs_at_once = 2, 2
    relu, sig = (p.id for p in plan.pairs)
    assert (relu, sig) == ("scaled_relu:sampling", "sigmoid_scale:sampling")
    # The second pair's replies come first in the file: each pair must still get its own.
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        "\n".join(
            json.dumps({"text": code_reply(source), "role": "generalist", "pair": pair})
            for pair, source in [(sig, SIG_PASS), (sig, SIG_OFF), (relu, RELU_WRONG), (relu, RELU_FUSED)]
        )
    )
    events: list[BenchEvent] = []

    async def collect(event: BenchEvent) -> None:
        events.append(event)

    outcome = await run_bench(service, plan, ScriptedBackend.from_file(replies), progress=collect)
    assert (outcome.complete, outcome.ran, outcome.failed, outcome.stopped) == (2, 2, [], None)
    rows = {row.pair: [a.status for a in row.attempts] for row in read_results(plan.spec.out)}
    assert rows == {relu: ["wrong_output", "passed"], sig: ["passed", "wrong_output"]}
    kinds = [(e.kind, e.pair) for e in events if e.kind in ("pair_started", "pair_done")]
    # The second pair started before the first was done: they ran side by side.
    assert kinds.index(("pair_started", sig)) < kinds.index(("pair_done", relu)), kinds
    last = events[-1]
    assert (last.kind, last.attempts_done, last.session_attempts, last.pairs_done) == ("finished", 4, 4, 2)
    # The totals never go back, whichever pair an event is about.
    assert all(a.attempts_done <= b.attempts_done for a, b in zip(events, events[1:], strict=False))


async def test_untied_scripted_replies_keep_the_pairs_one_at_a_time(
    service: RunService, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, PROBLEMS)
    backend = ScriptedBackend([code_reply(RELU_FUSED), code_reply(SIG_PASS)])
    events: list[BenchEvent] = []

    async def collect(event: BenchEvent) -> None:
        events.append(event)

    outcome = await run_bench(service, plan, backend, progress=collect)
    assert outcome.complete == 2
    kinds = [(e.kind, e.pair) for e in events if e.kind in ("pair_started", "pair_done")]
    assert [k for k, _ in kinds] == ["pair_started", "pair_done", "pair_started", "pair_done"]
    rows = {row.pair: [a.status for a in row.attempts] for row in read_results(plan.spec.out)}
    assert rows == {"scaled_relu:sampling": ["passed"], "sigmoid_scale:sampling": ["passed"]}


async def test_an_error_in_one_of_the_pairs_side_by_side_surfaces_as_itself(
    service: RunService, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, PROBLEMS).model_copy(deep=True)
    plan.spec.pairs_at_once = 2

    async def broken(event: BenchEvent) -> None:
        if event.kind == "pair_started" and event.index == 2:
            raise RuntimeError("the progress display broke")

    with pytest.raises(RuntimeError, match="the progress display broke"):
        await run_bench(service, plan, ScriptedBackend(), progress=broken)


async def test_a_pair_stops_at_the_speed_of_light_fraction(service: RunService, tmp_path: Path) -> None:
    from stark_mcp.orchestrator.limits import Limits

    plan = _plan(tmp_path, PROBLEMS).model_copy(deep=True)
    plan.spec.budget = 2
    relu, sig = (p.id for p in plan.pairs)
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        "\n".join(
            json.dumps({"text": code_reply(source), "role": "generalist", "pair": pair})
            for pair, source in [(relu, RELU_FUSED), (relu, RELU_WRONG), (sig, SIG_PASS), (sig, SIG_OFF)]
        )
    )
    outcome = await run_bench(
        service, plan, ScriptedBackend.from_file(replies), limits=Limits(stop_at_sol=1e-6)
    )
    assert outcome.failed == []
    rows = {row.pair: row for row in read_results(plan.spec.out)}
    assert [a.status for a in rows[relu].attempts] == ["passed"]
    assert [a.status for a in rows[sig].attempts] == ["passed"]
    for row in rows.values():
        assert row.sol_fraction is not None and row.reference_sol_fraction is not None
