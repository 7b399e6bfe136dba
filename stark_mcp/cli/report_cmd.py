"""``stark-mcp report DIR`` (a benchmark folder), ``stark-mcp report RUN_ID`` (one run) or
``stark-mcp report --runs ID,ID,...`` (the benchmark's tables over runs in the database, such as
runs a host drove through MCP).

A benchmark's report is made from its folder alone; a run's and a set of runs' from the database.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stark_mcp.cli.context import settings_of
from stark_mcp.errors import StarkError

if TYPE_CHECKING:
    from stark_mcp.config import Settings


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


async def _runs_report(settings: Settings, run_ids: list[str], out: Path) -> list[Path]:
    from stark_mcp.orchestrator.session import open_service
    from stark_mcp.report.writer import write_runs_report

    async with open_service(settings) as service:
        return (await write_runs_report(service, run_ids, out)).files


async def _run_report(settings: Settings, run_id: str, out: Path) -> list[Path]:
    from stark_mcp.orchestrator.session import open_service
    from stark_mcp.report.writer import write_run_report

    async with open_service(settings) as service:
        return (await write_run_report(service, run_id, out)).files


def report(
    ctx: typer.Context,
    target: str | None = typer.Argument(
        None, help="a benchmark folder (from stark-mcp bench --out) or a run id"
    ),
    out: Path | None = typer.Option(
        None, "--out", help="for a run: the folder to write to (default ./stark-out/RUN_ID); "
        "for --runs: default ./stark-out/runs-report",
    ),
    runs: str | None = typer.Option(
        None, "--runs", help="comma-separated run ids: the benchmark's tables over these runs "
        "(per level and overall), from the database",
    ),
) -> None:
    """Write the report of a benchmark folder (tables, plots, tree viewer), of one run (viewer, plot),
    or of several runs (--runs: the benchmark's tables and viewer)."""
    try:
        if runs is not None:
            if target is not None:
                raise _fail("give either a target or --runs, not both")
            run_ids = [item.strip() for item in runs.split(",") if item.strip()]
            if not run_ids:
                raise _fail("--runs needs at least one run id")
            where = out or Path("stark-out") / "runs-report"
            files = asyncio.run(_runs_report(settings_of(ctx), run_ids, where))
            for path in files:
                typer.echo(str(path))
            return
        if target is None:
            raise _fail("give a benchmark folder, a run id, or --runs ID,ID,...")
        folder = Path(target)
        if folder.is_dir():
            from stark_mcp.report.writer import write_bench_report

            if out is not None:
                raise _fail("--out applies to a run id; a benchmark's report is written into its folder")
            written = write_bench_report(folder)
            for note in written.notes:
                typer.echo(f"note: {note}", err=True)
            files = written.files
        elif folder.exists() or "/" in target:
            raise _fail(f"{target} is neither a benchmark folder nor a run id")
        else:
            files = asyncio.run(_run_report(settings_of(ctx), target, out or Path("stark-out") / target))
    except StarkError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot write the report: {exc}") from None
    for path in files:
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    app.command("report")(report)
