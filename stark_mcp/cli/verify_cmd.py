"""``stark-mcp verify``: a run's best kernel, or an exported file, evaluated again from scratch against
its recorded figures (``orchestrator/verify.py`` says what must hold, and the exit codes)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from stark_mcp.cli.context import check_device, settings_of, user_errors


def verify_command(
    ctx: typer.Context,
    target: str = typer.Argument(..., help="a run id, or a file written by `stark-mcp export`"),
    node: str | None = typer.Option(None, "--node", help="with a run id: this node (default: the best)"),
    tolerance: float | None = typer.Option(
        None, "--tolerance", min=0.0,
        help="share by which the speedup measured again may differ, beyond the recorded IQRs (default 0.25)",
    ),
    device: str | None = typer.Option(
        None, "--device", help="cpu or cuda (default: the device the figures were recorded on)",
        callback=check_device,
    ),
) -> None:
    """Re-evaluate a kernel in a fresh cache beside the eager baseline and check its recorded figures.

    Exit 0: they hold; 3: they do not (a speedup that does not follow from its times, or one not
    reproduced within the tolerance); 4: the kernel no longer passes; 2: bad input."""
    from stark_mcp.orchestrator.session import verify_kernel
    from stark_mcp.orchestrator.verify import TOLERANCE, render

    with user_errors():
        result = asyncio.run(
            verify_kernel(
                settings_of(ctx), target, node_id=node,
                tolerance=TOLERANCE if tolerance is None else tolerance, device=device,
            )
        )
    typer.echo(render(result))
    raise typer.Exit(result.exit_code)


def verify_file(ctx: typer.Context, path: Path) -> None:
    """``export``'s check of the file it wrote: the report on stderr, exit non-zero unless it holds."""
    from stark_mcp.orchestrator.session import verify_kernel
    from stark_mcp.orchestrator.verify import render

    typer.echo(f"verifying {path} (evaluated again from scratch; --no-verify skips this)", err=True)
    with user_errors():
        result = asyncio.run(verify_kernel(settings_of(ctx), str(path)))
    typer.echo(render(result), err=True)
    if not result.holds:
        raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)
