"""``stark-mcp runs``, ``show`` and ``export``: reading recorded runs back (no evaluator, no LLM)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stark_mcp.cli.context import fail, settings_of, user_errors

if TYPE_CHECKING:
    from stark_mcp.orchestrator.reads import RunSummary


def runs_command(ctx: typer.Context) -> None:
    """List the runs in the database, newest first: attempts, passes and the best speedup so far."""
    from stark_mcp.orchestrator.session import open_reads

    async def listing() -> list[RunSummary]:
        async with open_reads(settings_of(ctx)) as reads:
            return await reads.summaries()

    with user_errors():
        summaries = asyncio.run(listing())
    typer.echo(render_runs(summaries))


def render_runs(summaries: list[RunSummary]) -> str:
    if not summaries:
        return "no runs yet: start one with `stark-mcp run PROBLEM` or an MCP host"
    head = f"{'run':<10} {'name':<24} {'device':<6} {'status':<11} {'attempts':>9} {'passed':>6}  best"
    lines = [head]
    for s in summaries:
        eager = s.best_speedups.get("eager")
        best = f"{s.best_node_id} {eager:.2f}x vs eager" if s.best_node_id and eager else "-"
        if s.pending_baselines:
            best += f" (timing {', '.join(s.pending_baselines)})"
        lines.append(
            f"{s.run_id:<10} {s.name[:24]:<24} {s.device:<6} {s.status:<11} "
            f"{f'{s.attempts}/{s.budget}':>9} {s.passed:>6}  {best}"
        )
    return "\n".join(lines)


def show_command(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="run id"),
    node: str | None = typer.Option(None, "--node", help="show this node in full"),
    exchanges: bool = typer.Option(False, "--exchanges", help="print the stored prompts and replies"),
    full: bool = typer.Option(
        False, "--full", help="with --exchanges: include the system message and prefix"),
    profile: bool = typer.Option(
        False, "--profile", help="print the kernel profiles (every profiled node, or --node's)"),
) -> None:
    """Print a run's tree (node, action, verdict, runtime, speedup, adherence) and leaderboard."""
    from stark_mcp.orchestrator.report import (
        render_exchanges,
        render_leaderboard,
        render_node,
        render_profiles,
        render_tree,
    )
    from stark_mcp.orchestrator.session import open_reads

    async def show() -> str:
        async with open_reads(settings_of(ctx)) as reads:
            run = await reads.get_run(run_id)
            if exchanges:
                return render_exchanges(await reads.exchanges(run_id, node), full=full)
            if profile:
                tree = await reads.tree(run_id)
                return render_profiles([tree.get(node)] if node is not None else list(tree))
            if node is not None:
                return render_node(await reads.node(run_id, node))
            nodes = list(await reads.tree(run_id))
            return render_tree(run, nodes) + "\n\n" + render_leaderboard(nodes)

    with user_errors():
        typer.echo(asyncio.run(show()))


def export_command(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="run id"),
    out: Path = typer.Option(..., "--out", help="file to write, in an existing folder"),
    node: str | None = typer.Option(None, "--node", help="node id (default: the best correct node)"),
    no_verify: bool = typer.Option(
        False, "--no-verify", help="skip evaluating the written file again against its recorded figures"),
) -> None:
    """Write a correct node's kernel as a runnable .py file with a self-check against the reference and
    its evidence (the recorded figures), then verify it (``stark-mcp verify FILE``; exit codes as
    verify's) unless ``--no-verify``."""
    from stark_mcp.orchestrator.session import open_reads

    folder = out.parent
    if not folder.is_dir():
        raise fail(f"cannot write {out}: folder {folder} does not exist; create it first")
    if out.is_dir():
        raise fail(f"cannot write {out}: it is a folder; give a file name such as {out / 'kernel.py'}")

    async def export() -> tuple[str, str, list[str]]:
        async with open_reads(settings_of(ctx)) as reads:
            kernel = await reads.export(run_id, node)
        return kernel.node_id, kernel.source, kernel.warnings

    with user_errors():
        node_id, source, warnings = asyncio.run(export())
    try:
        out.write_text(source)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc}") from None
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"wrote {out} (run {run_id}, node {node_id}); run it with: python {out}", err=True)
    if not no_verify:
        from stark_mcp.cli.verify_cmd import verify_file

        verify_file(ctx, out)


def register(app: typer.Typer) -> None:
    app.command("runs")(runs_command)
    app.command("show")(show_command)
    app.command("export")(export_command)
