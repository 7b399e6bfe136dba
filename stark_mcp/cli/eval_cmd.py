"""``stark-mcp eval PROBLEM CANDIDATE``: one trusted evaluation from the command line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from pydantic import ValidationError

from stark_mcp.config import Settings
from stark_mcp.errors import StarkError
from stark_mcp.evaluator import BASELINE_NAMES, EvalSettings, Evaluator
from stark_mcp.problems import load_problem
from stark_mcp.records import Evaluation


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def parse_baselines(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in BASELINE_NAMES]
    if unknown:
        raise ValueError(f"unknown baseline(s) {', '.join(unknown)}; choose from {', '.join(BASELINE_NAMES)}")
    return names


def summary(ev: Evaluation) -> str:
    lines = [f"{ev.status.value}" + (f" ({ev.reason})" if ev.reason else "") + f": {ev.message}"]
    if ev.runtime is not None:
        lines.append(f"runtime: {ev.runtime.median_ms:.4g} ms median, IQR {ev.runtime.iqr_ms:.3g} ms, "
                     f"{ev.runtime.samples} calls on {ev.device_name} ({ev.device})")
    for name, stats in ev.baselines.items():
        speed = f", speedup {ev.speedups[name]:.3g}x" if name in ev.speedups else ""
        lines.append(f"baseline {name}: {stats.median_ms:.4g} ms{speed}")
    c = ev.correctness
    if c is not None and c.rel_norm_error is not None:
        lines.append(f"correctness: {c.trials_passed}/{c.trials} trials, rel error {c.rel_norm_error:.3g} "
                     f"(tolerance {c.tolerance:.3g}), allclose 1e-2 {c.allclose_1e2}, 1e-4 {c.allclose_1e4}")
    if ev.flags:
        lines.append("flags: " + ", ".join(ev.flags))
    if ev.profile is not None:
        from stark_mcp.agents.profiles import describe, render_profile_table

        lines.append("profile:\n" + (render_profile_table([("this", ev.profile)], per_node=8)
                                      or "- " + describe(ev.profile)))
    if ev.cached:
        lines.append("(cached result)")
    for phase, text in ev.logs.items():
        if not ev.passed and text:
            lines.append(f"--- {phase} log ---\n{text}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_command(
        problem: str = typer.Argument(..., help="problem file, JSONL:LEVEL/ID or KernelBench checkout:LEVEL/ID"),
        candidate: Path = typer.Argument(..., help="candidate source defining ModelNew"),
        device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
        as_json: bool = typer.Option(False, "--json", help="print the Evaluation as one JSON object"),
        baselines: str = typer.Option(",".join(BASELINE_NAMES), "--baselines",
                                      help="comma-separated baselines to time"),
        no_cache: bool = typer.Option(False, "--no-cache", help="re-evaluate even if a result is cached"),
    ) -> None:
        """Build, check and time CANDIDATE against PROBLEM in isolated processes."""
        if device not in ("auto", "cpu", "cuda"):
            raise _fail(f"--device must be auto, cpu or cuda, not {device!r}")
        try:
            settings = EvalSettings(baselines=parse_baselines(baselines))
        except (ValueError, ValidationError) as exc:
            raise _fail(str(exc)) from None
        try:
            source = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _fail(f"cannot read candidate {candidate}: {exc}") from None
        try:
            spec = load_problem(problem)
            evaluation = asyncio.run(_run(spec, source, device, settings, not no_cache))
        except StarkError as exc:
            raise _fail(str(exc)) from None
        typer.echo(evaluation.model_dump_json() if as_json else summary(evaluation))


async def _run(problem: object, source: str, device: str, settings: EvalSettings, use_cache: bool) -> Evaluation:
    async with Evaluator(Settings.from_env().cache, settings) as evaluator:
        return await evaluator.evaluate(problem, source, device=device, use_cache=use_cache)  # type: ignore[arg-type]
