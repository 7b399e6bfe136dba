"""``stark-mcp bench``: many problems times many strategies, resumable, then the report.

stdout carries only the final table; progress and notices go to stderr. Heavy modules are
imported inside the command, so ``--help`` stays fast.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from stark_mcp.cli.context import EXECUTOR_HELP, GPUS_HELP, RAY_ADDRESS_HELP, scaled, settings_of
from stark_mcp.device import DEVICE_NAMES
from stark_mcp.errors import StarkError

if TYPE_CHECKING:
    from rich.console import Console

    from stark_mcp.bench import BenchOutcome, BenchPlan
    from stark_mcp.bench.progress import BenchEvent
    from stark_mcp.config import Settings
    from stark_mcp.llm import LLMBackend

INTERRUPTED_EXIT = 130
DEFAULT_OUT = Path("stark-bench")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _names(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _levels(value: str | None) -> list[int]:
    try:
        return [int(v) for v in _names(value)]
    except ValueError:
        raise _fail(f"--levels takes level numbers separated by commas, e.g. 1,2; got {value!r}") from None


class _Display:
    """One status line for the whole benchmark on stderr; pair events and attempts logged above it."""

    def __init__(self, console: Console) -> None:
        from rich.live import Live
        from rich.text import Text

        from stark_mcp.bench.progress import BenchProgressState

        self.console = console
        self.state = BenchProgressState()
        self._text = Text
        # A live line only on a terminal: piped output gets plain lines, one per event logged.
        self.live = (
            Live(Text("starting"), console=console, refresh_per_second=4) if console.is_terminal else None
        )

    async def on_event(self, event: BenchEvent) -> None:
        self.state = self.state.apply(event)
        search = event.search
        attempt_done = search is not None and search.kind in ("recorded", "failed")
        if event.kind not in ("search", "phase") or attempt_done:
            self.console.log(self.state.activity)
        if event.kind in ("pair_done", "pair_skipped", "finished") and self.live is None:
            self.console.log(self.state.status_line())
        if self.live is not None:
            self.live.update(self._text(f"{self.state.status_line()}\n{self.state.activity}"))


async def _bench(
    settings: Settings,
    plan: BenchPlan,
    backend: LLMBackend,
    console: Console,
    stop_at_sol: float | None = None,
) -> BenchOutcome:
    from stark_mcp.bench import run_bench
    from stark_mcp.orchestrator.limits import Limits
    from stark_mcp.orchestrator.session import open_service

    display = _Display(console)
    limits = Limits(stop_at_sol=stop_at_sol)
    # Pairs are independent measurements: no run reads what another pair's run learned.
    independent = settings.model_copy(update={"memory": False})
    async with open_service(independent, plan.spec.eval_settings) as service:
        if display.live is None:
            return await run_bench(service, plan, backend, limits=limits, progress=display.on_event)
        with display.live:
            return await run_bench(service, plan, backend, limits=limits, progress=display.on_event)


def _print_summary(out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    report = json.loads((out / "report.json").read_text())
    table = Table(title=f"stark-mcp bench {report['bench_id']}: all levels, vs eager")
    for column in (
        "strategy",
        "problems",
        "success",
        "fast_1",
        "fast_1.5",
        "fast_2",
        "geomean",
        "mean",
        "cost",
    ):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for name, m in report["levels"]["all"].items():
        fast = m["fast_p"].get("eager", {})
        pct = [f"{100 * fast[p]:.0f}%" if fast.get(p) is not None else "" for p in ("1", "1.5", "2")]
        geo, mean = m["geomean_speedup"].get("eager"), m["mean_speedup"].get("eager")
        table.add_row(
            name,
            str(m["problems"]),
            f"{100 * m['success_rate']:.0f}%",
            *pct,
            f"{geo:.2f}x" if geo else "",
            f"{mean:.2f}x" if mean else "",
            f"${m['total_cost_usd']:.4f}",
        )
    console = Console(file=sys.stdout, width=120)
    console.print(table)
    console.print(
        f"report: {out / 'report.md'}, {out / 'report.html'}, {out / 'report.json'} and plots in {out}"
    )


def bench(
    ctx: typer.Context,
    problems: str = typer.Argument(
        ...,
        help="a KernelBench checkout, a JSONL file of {level, problem_id, name, code}, "
        "or a folder of problem files",
    ),
    levels: str | None = typer.Option(None, "--levels", help="levels to run, e.g. 1,2,3 (default all)"),
    select: str | None = typer.Option(
        None, "--select", help="problems to run, comma-separated: LEVEL/ID, LEVEL/NAME or NAME"
    ),
    sample: int | None = typer.Option(None, "--sample", help="draw N problems from each level"),
    seed: int = typer.Option(0, "--seed", help="seed of the sample and of every run's search"),
    strategies: str = typer.Option(
        "stark,sampling,reflexion,search_only,ma_only", "--strategies", help="strategies to compare"
    ),
    ablate: str | None = typer.Option(
        None,
        "--ablate",
        help="also run STARK with one component off, per name: roles, anchors, windows, search",
    ),
    budget: int = typer.Option(30, "--budget", help="attempts per (problem, strategy) run"),
    language: str | None = typer.Option(
        None,
        "--language",
        help="kernels in cuda or triton (GPU) or cpp (CPU); default cuda on a GPU, cpp on the CPU",
    ),
    model: str | None = typer.Option(None, "--model", help="model for every role (default STARK_MODEL)"),
    backend_spec: str | None = typer.Option(
        None,
        "--backend",
        help="anthropic or scripted:FILE (replies consumed in order; one with a pair key by that pair only)",
    ),
    device: str = typer.Option("auto", "--device", help=DEVICE_NAMES),
    parallel: int = typer.Option(
        0, "--parallel", help="expansions in flight within each run (default 0: one per evaluation worker)"
    ),
    pairs_at_once: int = typer.Option(
        0,
        "--pairs-at-once",
        help="runs side by side (default 0: one per evaluation worker; 1 while scripted replies tied to "
        "no pair remain, so they are consumed in order)",
    ),
    baselines: str | None = typer.Option(
        None,
        "--baselines",
        help="baselines to time, comma-separated (default: every one, max-autotune with and without "
        "CUDA graphs included)",
    ),
    eval_overrides: str | None = typer.Option(
        None, "--eval-settings", help='JSON object of evaluator settings, e.g. {"trials": 3}'
    ),
    out: Path = typer.Option(
        DEFAULT_OUT, "--out", help="benchmark folder; rerun with the same one to resume"
    ),
    report: bool = typer.Option(
        True, "--report/--no-report", help="write the report when the benchmark ends"
    ),
    gpus: str | None = typer.Option(None, "--gpus", help=GPUS_HELP),
    executor: str | None = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    stop_at_sol: float | None = typer.Option(
        None, "--stop-at-sol", min=0.0, help="end a pair's run once its best attempt reaches this fraction "
        "of the problem's floor on the machine, e.g. 0.9 (docs/sol.md)"),
) -> None:
    """Run every (problem, strategy) pair as one run, resumably, and write the report."""
    from pydantic import ValidationError
    from rich.console import Console

    from stark_mcp.bench import BenchSpec, plan_bench
    from stark_mcp.bench.plan import bench_eval_settings
    from stark_mcp.llm import backend_from_settings
    from stark_mcp.report.writer import write_bench_report

    settings = scaled(settings_of(ctx), gpus, executor, ray_address)
    try:
        extra: dict[str, Any] = json.loads(eval_overrides) if eval_overrides else {}
        if not isinstance(extra, dict):
            raise ValueError("--eval-settings must be a JSON object of evaluator settings")
        spec = BenchSpec(
            problems=problems,
            levels=_levels(levels),
            select=_names(select),
            sample=sample,
            seed=seed,
            strategies=_names(strategies),
            ablate=_names(ablate),
            budget=budget,
            language=language,
            model=model,
            backend=backend_spec,
            device=device,
            parallel=parallel,
            pairs_at_once=pairs_at_once,
            out=out,
            eval_settings=bench_eval_settings(_names(baselines), extra),
        )
        plan = plan_bench(spec)
        # Before anything slow: without a key this fails here, saying how to set one.
        backend = backend_from_settings(settings, spec.backend, model=spec.model)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise _fail(f"invalid {where}: {first['msg']}") from None
    except ValueError as exc:
        raise _fail(str(exc)) from None
    except StarkError as exc:
        raise _fail(str(exc)) from None
    console = Console(stderr=True, log_path=False)
    console.log(
        f"{len(plan.problems)} problem(s) x {len(plan.strategies)} strateg(ies) "
        f"({', '.join(plan.strategies)}) = {len(plan.pairs)} runs of {spec.budget} attempts, in {out}"
    )
    try:
        outcome = asyncio.run(_bench(settings, plan, backend, console, stop_at_sol))
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted; everything recorded is kept. Rerun the same command to continue, or write "
            f"the report so far with: stark-mcp report {out}",
            err=True,
        )
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except StarkError as exc:
        raise _fail(str(exc)) from None
    for failure in outcome.failed:
        typer.echo(f"warning: {failure.pair}: {failure.message}", err=True)
    if outcome.stopped:
        typer.echo(f"stopped early: {outcome.stopped}", err=True)
    unfinished = outcome.complete < outcome.pairs
    if unfinished:
        typer.echo(
            f"{outcome.complete}/{outcome.pairs} pairs complete; rerun the same command to continue "
            "the others",
            err=True,
        )
    if report:
        try:
            files = write_bench_report(out)
        except StarkError as exc:
            raise _fail(str(exc)) from None
        for note in files.notes:
            typer.echo(f"note: {note}", err=True)
        _print_summary(out)
    else:
        typer.echo(f"write the report with: stark-mcp report {out}", err=True)
    if unfinished:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
