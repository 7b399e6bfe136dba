"""``stark-mcp run``: the headless STARK loop.

stdout carries only the final summary; the live progress and every notice go to stderr.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from stark_mcp.cli.context import (
    DEVICE_HELP,
    EXECUTOR_HELP,
    GPUS_HELP,
    RAY_ADDRESS_HELP,
    check_device,
    fail,
    scaled,
    settings_of,
    user_errors,
)
from stark_mcp.cli.display import PhaseDisplay, print_summary
from stark_mcp.device import Device

if TYPE_CHECKING:
    from stark_mcp.config import Settings
    from stark_mcp.llm import LLMBackend
    from stark_mcp.orchestrator.events import SearchEvent, SearchSummary
    from stark_mcp.orchestrator.limits import Limits
    from stark_mcp.orchestrator.run_service import RunService
    from stark_mcp.orchestrator.session import EvalSettings

DEFAULT_BUDGET = 30
INTERRUPTED_EXIT = 130
# The run's config key holding how ``run`` was asked to drive it, for ``--resume`` to repeat.
RUNNER_CONFIG = "runner"


class SearchDisplay(PhaseDisplay):
    """The live status line, fed by search events and by baseline progress; knows its run once made."""

    def __init__(self) -> None:
        from stark_mcp.orchestrator.display import DisplayState

        super().__init__()
        self.state = DisplayState()
        self.run_id: str | None = None

    async def on_event(self, event: SearchEvent) -> None:
        self.state = self.state.apply(event)
        if event.kind in ("recorded", "failed", "started", "finished", "stopped"):
            self.line(self.state.activity)
        if self.live:
            self.show(f"{self.state.status_line()}\n{self.state.activity}")


@dataclass
class RunRequest:
    """What ``stark-mcp run`` was asked to do, checked before anything slow starts."""

    problem: str | None
    budget: int | None
    strategy: str | None
    device: Device
    parallel: int
    resume: str | None
    out: Path | None
    seed: int | None
    limits: Limits
    eval_settings: EvalSettings
    language: str | None = None
    runner_config: dict[str, Any] | None = None


def runner_config(
    backend_spec: str | None, model: str | None, out: Path | None, max_cost: float | None,
    max_wall: float | None, parallel: int | None,
) -> dict[str, Any]:
    """What a new run's ``--resume`` must repeat: the backend (a scripted file by its absolute path),
    the model, the output folder (the default one by the folder it was started in), the limits
    and the parallelism."""
    spec = backend_spec.strip() if backend_spec else None
    if spec and spec.startswith("scripted:") and spec != "scripted:":
        spec = "scripted:" + str(Path(spec.removeprefix("scripted:")).expanduser().resolve())
    return {
        "backend": spec, "model": model, "out": str(out.resolve()) if out else None,
        "cwd": str(Path.cwd().resolve()), "max_cost_usd": max_cost, "max_wall_s": max_wall,
        "parallel": parallel,
    }


def resumed_out(stored: dict[str, Any], run_id: str) -> Path:
    """A resumed run's output folder: the one it was given, else ``stark-out/RUN_ID`` of the folder
    it was started in."""
    if stored.get("out"):
        return Path(stored["out"])
    return Path(stored.get("cwd") or ".") / "stark-out" / run_id


async def _stored_runner_config(settings: Settings, run_id: str) -> dict[str, Any]:
    from stark_mcp.orchestrator.session import open_reads

    async with open_reads(settings) as reads:
        run = await reads.get_run(run_id)
    stored = run.config.get(RUNNER_CONFIG)
    return stored if isinstance(stored, dict) else {}


def run_command(
    ctx: typer.Context,
    problem: str | None = typer.Argument(
        None, help="problem file or spec (JSONL:LEVEL/ID ...); omit with --resume"),
    budget: int | None = typer.Option(
        None, "--budget", help=f"attempts B for a new run (default {DEFAULT_BUDGET}); with --resume, "
        "the most attempts this session makes"),
    strategy: str | None = typer.Option(
        None, "--strategy", help="stark, sampling, reflexion, search_only or ma_only (default stark)"),
    model: str | None = typer.Option(None, "--model", help="model for every role (default STARK_MODEL)"),
    device: str | None = typer.Option(None, "--device", help=DEVICE_HELP, callback=check_device),
    parallel: int | None = typer.Option(
        None, "--parallel", min=1, help="expansions in flight at once (default 1; --resume: the run's)"),
    resume: str | None = typer.Option(
        None, "--resume", help="continue the run with this id, with the backend, model, output folder, "
        "limits and parallelism it was started with unless given again"),
    out: Path | None = typer.Option(None, "--out", help="output folder (default ./stark-out/RUN_ID)"),
    seed: int | None = typer.Option(None, "--seed", help="search seed (default random)"),
    max_cost: float | None = typer.Option(
        None, "--max-cost", help="stop launching once the run's LLM calls cost this many USD"),
    max_wall: float | None = typer.Option(None, "--max-wall", help="stop launching after this many seconds"),
    stop_at_sol: float | None = typer.Option(
        None, "--stop-at-sol", help="stop once the best attempt reaches this fraction of the problem's "
        "floor on the machine, e.g. 0.9 (docs/sol.md)"),
    backend_spec: str | None = typer.Option(
        None, "--backend", help="anthropic or scripted:FILE (default STARK_LLM, else anthropic)"),
    baselines: str | None = typer.Option(
        None, "--baselines", help="baselines to time, comma-separated (default: all of them)"),
    eval_overrides: str | None = typer.Option(
        None, "--eval-settings", help='JSON object of evaluator settings, e.g. {"trials": 3}'),
    gpus: str | None = typer.Option(None, "--gpus", help=GPUS_HELP),
    executor: str | None = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    language: str | None = typer.Option(
        None, "--language",
        help="kernels in cuda or triton (GPU) or cpp (CPU); default cuda on a GPU, cpp on the CPU"),
) -> None:
    """Optimize PROBLEM with the STARK loop, calling the LLM API directly."""
    from stark_mcp.llm import backend_from_settings
    from stark_mcp.orchestrator.limits import Limits
    from stark_mcp.orchestrator.session import parse_eval_settings
    from stark_mcp.orchestrator.strategies import get_strategy

    settings = scaled(settings_of(ctx), gpus, executor, ray_address)
    if problem is None and resume is None:
        raise fail("give a PROBLEM file to start a run, or --resume RUN_ID to continue one")
    if language is not None and resume is not None:
        raise fail("--language applies to a new run; a resumed run keeps its own")
    if language is not None:
        from stark_mcp.orchestrator.inputs import check_language

        chosen_device = device or settings.device
        with user_errors():  # the device check needs the device resolved: 'auto' waits for create_run
            check_language(language, Device.CUDA if chosen_device is Device.AUTO else chosen_device)
    stored: dict[str, Any] = {}
    if resume is not None:
        with user_errors():
            stored = asyncio.run(_stored_runner_config(settings, resume))
        backend_spec = backend_spec or stored.get("backend")
        model = model or stored.get("model")
        out = out or resumed_out(stored, resume)
        max_cost = max_cost if max_cost is not None else stored.get("max_cost_usd")
        max_wall = max_wall if max_wall is not None else stored.get("max_wall_s")
        parallel = parallel or stored.get("parallel")
    with user_errors():
        eval_settings = parse_eval_settings(baselines, eval_overrides)
        limits = Limits(max_cost_usd=max_cost, max_wall_s=max_wall, stop_at_sol=stop_at_sol)
        if strategy is not None:
            get_strategy(strategy)
        # Before anything slow: without a key this fails here, with the message saying how to set one.
        backend = backend_from_settings(settings, backend_spec, model=model)
    request = RunRequest(
        problem=problem, budget=budget, strategy=strategy, device=device or settings.device,
        parallel=parallel or 1,
        resume=resume, out=out, seed=seed, limits=limits, eval_settings=eval_settings, language=language,
    )
    if resume is None:
        request.runner_config = runner_config(
            backend_spec or settings.llm, model, out, max_cost, max_wall, parallel
        )
    display = SearchDisplay()
    try:
        with user_errors(), display.showing():
            summary, kernel, summary_path = asyncio.run(_run(settings, request, backend, display))
    except KeyboardInterrupt:
        if display.run_id:
            typer.echo("interrupted; everything recorded is kept. Resume with: "
                       f"stark-mcp run --resume {display.run_id}", err=True)
        else:
            typer.echo("interrupted before the run was recorded", err=True)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    print_summary(f"stark-mcp run {summary.run_id}", _summary_rows(summary, kernel, summary_path))


def _summary_rows(summary: SearchSummary, kernel: Path | None, summary_path: Path) -> list[tuple[str, str]]:
    rows = [
        ("strategy", f"{summary.strategy} (policy {summary.policy})"),
        ("attempts", f"{summary.attempts}/{summary.budget} ({summary.new_attempts} this session)"),
        ("stopped", f"{summary.stop_reason}: {summary.message}"),
    ]
    if summary.failed_expansions:
        rows.append(("no attempt", f"{len(summary.failed_expansions)} expansion(s) ended without a kernel"))
    if summary.best_node_id is not None:
        rows.append(("best", f"{summary.best_node_id}: {summary.best_runtime_ms:.4g} ms"))
        rows += [(f"vs {name}", f"{value:.2f}x") for name, value in sorted(summary.speedups.items())]
    else:
        rows.append(("best", "no correct kernel yet"))
    usage = summary.usage
    tokens = f"{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens"
    rows.append(("LLM", f"{usage.calls} calls, {tokens}, ${usage.cost_usd:.4f}"))
    rows.append(("wall time", f"{summary.wall_s:.1f} s"))
    rows.append(("kernel", str(kernel) if kernel else "(none written)"))
    rows.append(("summary", str(summary_path)))
    return rows


async def _run(
    settings: Settings, req: RunRequest, backend: LLMBackend, display: SearchDisplay
) -> tuple[SearchSummary, Path | None, Path]:
    from stark_mcp.orchestrator.loop import run_search
    from stark_mcp.orchestrator.session import open_service
    from stark_mcp.orchestrator.strategies import DEFAULT_STRATEGY, get_strategy
    from stark_mcp.orchestrator.summary import summarize_run

    async with open_service(settings, req.eval_settings) as service:
        if req.resume:
            run = await service.get_run(req.resume)
            session_budget = req.budget
        else:
            chosen = get_strategy(req.strategy or DEFAULT_STRATEGY)
            assert req.problem is not None  # checked by the command
            run, _root = await service.create_run(
                req.problem, device=req.device, policy=chosen.policy, budget=req.budget or DEFAULT_BUDGET,
                seed=req.seed, strategy=chosen.name, eval_settings=req.eval_settings,
                progress=display.on_phase, language=req.language,
                config={RUNNER_CONFIG: req.runner_config or {}},
            )
            session_budget = None
        display.run_id = run.id
        display.line(f"run {run.id}: {run.name} on {run.device} in {run.language}, budget {run.budget}")
        before = await service.attempts(run.id)
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
                new_attempts=await service.attempts(run.id) - before,
                wall_s=asyncio.get_running_loop().time() - started,
            )
            await _write_outputs(service, summary, out, display)
            raise
        kernel = await _write_outputs(service, summary, out, display)
    return summary, kernel, out / "summary.json"


async def _write_outputs(
    service: RunService, summary: SearchSummary, out: Path, display: PhaseDisplay
) -> Path | None:
    """``<out>/summary.json`` always; ``<out>/best_kernel.py`` when a correct kernel exists."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n")
    if summary.best_node_id is None:
        return None
    exported = await service.export(summary.run_id, summary.best_node_id)
    for warning in exported.warnings:
        display.line(f"warning: {warning}")
    kernel = out / "best_kernel.py"
    kernel.write_text(exported.source)
    return kernel


def register(app: typer.Typer) -> None:
    app.command("run")(run_command)
