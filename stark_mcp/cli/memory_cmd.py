"""``stark-mcp memory list|export|clear``: what finished runs learned, kept for similar problems."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stark_mcp.cli.context import settings_of, user_errors

if TYPE_CHECKING:
    from stark_mcp.memory import MemoryEntry

memory_app = typer.Typer(help="What finished runs learned, shown to the planner of similar problems.")


@memory_app.command("list")
def list_command(ctx: typer.Context) -> None:
    """One line per kept lesson: its run, problem, best speedup over eager and operators."""
    from stark_mcp.orchestrator.session import open_reads

    async def entries() -> list[MemoryEntry]:
        async with open_reads(settings_of(ctx)) as reads:
            return await reads.memories()

    with user_errors():
        found = asyncio.run(entries())
    if not found:
        typer.echo("no lessons kept yet (a run keeps one when it uses its budget)")
    for entry in found:
        gain = f"{entry.speedup:.2f}x" if entry.speedup is not None else "unsolved"
        typer.echo(f"{entry.run_id}  {entry.problem_name}  {gain}  ops: {', '.join(entry.ops)}")


@memory_app.command("export")
def export_command(
    ctx: typer.Context,
    out: Path | None = typer.Option(None, "--out", help="JSON file to write (default: stdout)"),
) -> None:
    """Every kept lesson as a JSON list."""
    from stark_mcp.orchestrator.session import open_reads

    async def entries() -> list[MemoryEntry]:
        async with open_reads(settings_of(ctx)) as reads:
            return await reads.memories()

    with user_errors():
        text = json.dumps([e.model_dump(mode="json") for e in asyncio.run(entries())], indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        typer.echo(str(out))


@memory_app.command("clear")
def clear_command(ctx: typer.Context) -> None:
    """Forget every kept lesson (the runs stay)."""
    from stark_mcp.orchestrator.session import open_service

    async def clear() -> int:
        async with open_service(settings_of(ctx)) as service:
            return await service.clear_memory()

    with user_errors():
        typer.echo(f"forgot {asyncio.run(clear())} lesson(s)")


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
