"""``stark-mcp run`` (the headless STARK loop), ``stark-mcp show`` and ``stark-mcp export``.

stdout carries only the final summary (``run``) or the requested text (``show``); the live
progress display and every notice go to stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from stark_mcp.config import Settings
from stark_mcp.errors import StarkError
from stark_mcp.evaluator import BASELINE_NAMES, EvalSettings, Evaluator
from stark_mcp.llm import LLMBackend, backend_from_settings
from stark_mcp.orchestrator.events import SearchEvent, SearchSummary
from stark_mcp.orchestrator.export import export_source
from stark_mcp.orchestrator.limits import Limits
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.progress import ProgressState
from stark_mcp.orchestrator.report import (
    render_exchanges,
    render_leaderboard,
    render_node,
    render_profiles,
    render_tree,
)
from stark_mcp.orchestrator.service import RunService
from stark_mcp.orchestrator.strategies import DEFAULT_STRATEGY, get_strategy
from stark_mcp.orchestrator.summary import summarize_run
from stark_mcp.store import Store
from stark_mcp.tree import Tree, leaderboard

DEFAULT_BUDGET = 30
INTERRUPTED_EXIT = 130


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


@asynccontextmanager
async def _open_service(
    settings: Settings, eval_settings: EvalSettings | None = None
) -> AsyncIterator[RunService]:
    async with await Store.open(settings.database) as store, Evaluator(
        settings.cache, settings=eval_settings or EvalSettings()
    ) as evaluator:
        yield RunService(store, evaluator)


def _eval_settings(baselines: str, overrides: str | None) -> EvalSettings:
    names = tuple(n.strip() for n in baselines.split(",") if n.strip())
    extra: dict[str, Any] = json.loads(overrides) if overrides else {}
    if not isinstance(extra, dict):
        raise ValueError("--eval-settings must be a JSON object of EvalSettings fields")
    return EvalSettings(**{"baselines": names, **extra})


class _Display:
    """The live status line on stderr, fed by search events and by baseline progress."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.state = ProgressState()
        self.live = Live(Text("starting"), console=console, refresh_per_second=4, transient=False)

    def _draw(self) -> None:
        self.live.update(Text(f"{self.state.status_line()}\n{self.state.activity}"))

    async def on_event(self, event: SearchEvent) -> None:
        self.state = self.state.apply(event)
        if event.kind == "recorded" or event.kind == "failed":
            self.console.log(self.state.activity)
        self._draw()

    async def on_phase(self, done: float, total: float | None, message: str) -> None:
        self.state = self.state.model_copy(update={"activity": message})
        self._draw()


def _summary_table(summary: SearchSummary, kernel: Path | None, summary_path: Path) -> Table:
    table = Table(title=f"stark-mcp run {summary.run_id}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("strategy", f"{summary.strategy} (policy {summary.policy})")
    table.add_row("attempts", f"{summary.attempts}/{summary.budget} ({summary.new_attempts} this session)")
    table.add_row("stopped", f"{summary.stop_reason}: {summary.message}")
    if summary.failed_expansions:
        table.add_row("no attempt", f"{len(summary.failed_expansions)} expansion(s) ended without a kernel")
    if summary.best_node_id is not None:
        table.add_row("best", f"{summary.best_node_id}: {summary.best_runtime_ms:.4g} ms")
        for name, value in sorted(summary.speedups.items()):
            table.add_row(f"vs {name}", f"{value:.2f}x")
    else:
        table.add_row("best", "no correct kernel yet")
    usage = summary.usage
    tokens = f"{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens"
    table.add_row("LLM", f"{usage.calls} calls, {tokens}, ${usage.cost_usd:.4f}")
    table.add_row("wall time", f"{summary.wall_s:.1f} s")
    table.add_row("kernel", str(kernel) if kernel else "(none written)")
    table.add_row("summary", str(summary_path))
    return table


async def _write_outputs(service: RunService, summary: SearchSummary, out: Path) -> Path | None:
    """``<out>/summary.json`` always; ``<out>/best_kernel.py`` when a correct kernel exists."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n")
    best = await service.best(summary.run_id)
    if best is None:
        return None
    run = await service.get_run(summary.run_id)
    kernel = out / "best_kernel.py"
    kernel.write_text(export_source(run.problem, best))
    return kernel


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_command(
        problem: str | None = typer.Argument(
            None, help="problem file or spec (JSONL:LEVEL/ID ...); omit with --resume"),
        budget: int | None = typer.Option(
            None, "--budget", help=f"attempts B for a new run (default {DEFAULT_BUDGET}); with --resume, "
            "the most attempts this session makes"),
        strategy: str | None = typer.Option(
            None, "--strategy", help="stark, sampling, reflexion, search_only or ma_only (default stark)"),
        model: str | None = typer.Option(None, "--model", help="model for every role (default STARK_MODEL)"),
        device: str = typer.Option("auto", "--device", help="auto, cuda or cpu"),
        parallel: int = typer.Option(1, "--parallel", min=1, help="expansions in flight at once"),
        resume: str | None = typer.Option(None, "--resume", help="continue the run with this id"),
        out: Path | None = typer.Option(None, "--out", help="output folder (default ./stark-out/RUN_ID)"),
        seed: int | None = typer.Option(None, "--seed", help="search seed (default random)"),
        max_cost: float | None = typer.Option(
            None, "--max-cost", help="stop launching once the run's LLM calls cost this many USD"),
        max_wall: float | None = typer.Option(
            None, "--max-wall", help="stop launching after this many seconds"),
        backend_spec: str | None = typer.Option(
            None, "--backend", help="anthropic or scripted:FILE (default STARK_LLM, else anthropic)"),
        baselines: str = typer.Option(
            ",".join(BASELINE_NAMES), "--baselines", help="baselines to time, comma-separated"),
        eval_overrides: str | None = typer.Option(
            None, "--eval-settings", help='JSON object of evaluator settings, e.g. {"trials": 3}'),
    ) -> None:
        """Optimize PROBLEM with the STARK loop, calling the LLM API directly."""
        if device not in ("auto", "cpu", "cuda"):
            raise _fail(f"--device must be auto, cpu or cuda, not {device!r}")
        if problem is None and resume is None:
            raise _fail("give a PROBLEM file to start a run, or --resume RUN_ID to continue one")
        try:
            eval_settings = _eval_settings(baselines, eval_overrides)
            limits = Limits(max_cost_usd=max_cost, max_wall_s=max_wall)
            if strategy is not None:
                get_strategy(strategy)
            # Before anything slow: without a key this fails here, with the message saying how to set one.
            backend = backend_from_settings(backend_spec, model=model)
        except (ValueError, ValidationError) as exc:
            raise _fail(str(exc)) from None
        except StarkError as exc:
            raise _fail(str(exc)) from None
        console = Console(stderr=True, log_path=False)
        request = RunRequest(
            problem=problem, budget=budget, strategy=strategy, device=device, parallel=parallel,
            resume=resume, out=out, seed=seed, limits=limits, eval_settings=eval_settings,
        )
        holder: dict[str, Any] = {}
        try:
            summary, kernel, summary_path = asyncio.run(_run(request, backend, console, holder))
        except KeyboardInterrupt:
            run_id = holder.get("run_id")
            if run_id:
                typer.echo("interrupted; everything recorded is kept. Resume with: "
                           f"stark-mcp run --resume {run_id}", err=True)
            else:
                typer.echo("interrupted before the run was recorded", err=True)
            raise typer.Exit(INTERRUPTED_EXIT) from None
        except StarkError as exc:
            raise _fail(str(exc)) from None
        Console(file=sys.stdout, width=120).print(_summary_table(summary, kernel, summary_path))

    @app.command("show")
    def show_command(
        run_id: str = typer.Argument(..., help="run id"),
        node: str | None = typer.Option(None, "--node", help="show this node in full"),
        exchanges: bool = typer.Option(False, "--exchanges", help="print the stored prompts and replies"),
        full: bool = typer.Option(
            False, "--full", help="with --exchanges: include the system message and prefix"),
        profile: bool = typer.Option(
            False, "--profile", help="print the kernel profiles (all nodes, or --node's)"),
    ) -> None:
        """Print a run's tree (node, action, verdict, runtime, speedup, adherence) and leaderboard."""
        try:
            typer.echo(asyncio.run(_show(run_id, node, exchanges, full, profile)))
        except StarkError as exc:
            raise _fail(str(exc)) from None

    @app.command("export")
    def export_command(
        run_id: str = typer.Argument(..., help="run id"),
        out: Path = typer.Option(..., "--out", help="file to write"),
        node: str | None = typer.Option(None, "--node", help="node id (default: the best correct node)"),
    ) -> None:
        """Write a node's kernel as a runnable .py file with a self-check against the reference."""
        try:
            node_id = asyncio.run(_export(run_id, node, out))
        except StarkError as exc:
            raise _fail(str(exc)) from None
        except OSError as exc:
            raise _fail(f"cannot write {out}: {exc}") from None
        typer.echo(f"wrote {out} (run {run_id}, node {node_id}); run it with: python {out}", err=True)


class RunRequest(BaseModel):
    """What ``stark-mcp run`` was asked to do, checked before anything slow starts."""

    problem: str | None
    budget: int | None
    strategy: str | None
    device: str
    parallel: int
    resume: str | None
    out: Path | None
    seed: int | None
    limits: Limits
    eval_settings: EvalSettings


async def _run(
    req: RunRequest, backend: LLMBackend, console: Console, holder: dict[str, Any]
) -> tuple[SearchSummary, Path | None, Path]:
    settings = Settings.from_env()
    display = _Display(console)
    async with _open_service(settings, req.eval_settings) as service:
        with display.live:
            if req.resume:
                run = await service.get_run(req.resume)
                session_budget = req.budget
            else:
                chosen = get_strategy(req.strategy or DEFAULT_STRATEGY)
                assert req.problem is not None  # checked by the command
                run, _root = await service.create_run(
                    req.problem, device=req.device, policy=chosen.policy, budget=req.budget or DEFAULT_BUDGET,
                    seed=req.seed, strategy=chosen.name, eval_settings=req.eval_settings,
                    progress=display.on_phase,
                )
                session_budget = None
            holder["run_id"] = run.id
            console.log(f"run {run.id}: {run.name} on {run.device}, budget {run.budget}")
            before = await service.store.count_nodes(run.id)
            out = req.out or Path("stark-out") / run.id
            started = asyncio.get_running_loop().time()
            try:
                summary = await run_search(
                    service, run.id, backend, budget=session_budget, strategy=req.strategy,
                    parallel=req.parallel, limits=req.limits, progress=display.on_event,
                )
            except asyncio.CancelledError:
                # Ctrl-C: the loop has marked the run interrupted; leave a summary of what is recorded.
                summary = await summarize_run(
                    service, run.id, stop_reason="interrupted",
                    new_attempts=await service.store.count_nodes(run.id) - before,
                    wall_s=asyncio.get_running_loop().time() - started,
                )
                await _write_outputs(service, summary, out)
                raise
        kernel = await _write_outputs(service, summary, out)
    return summary, kernel, out / "summary.json"


async def _show(run_id: str, node_id: str | None, exchanges: bool, full: bool, profile: bool = False) -> str:
    settings = Settings.from_env()
    async with await Store.open(settings.database) as store:
        run = await store.get_run(run_id)
        if exchanges:
            return render_exchanges(await store.exchanges(run_id, node_id), full=full)
        if profile:
            nodes = [await store.get_node(run_id, node_id)] if node_id else await store.nodes(run_id)
            return render_profiles(nodes)
        if node_id is not None:
            return render_node(await store.get_node(run_id, node_id))
        nodes = await store.nodes(run_id)
        return render_tree(run, nodes) + "\n\n" + render_leaderboard(nodes)


async def _export(run_id: str, node_id: str | None, out: Path) -> str:
    settings = Settings.from_env()
    async with await Store.open(settings.database) as store:
        run = await store.get_run(run_id)
        if node_id is not None:
            node = await store.get_node(run_id, node_id)
        else:
            best = leaderboard(Tree(await store.nodes(run_id)), 1)
            if not best:
                raise StarkError(f"run {run_id} has no correct node yet; name one with --node")
            node = best[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(export_source(run.problem, node))
    return node.id
