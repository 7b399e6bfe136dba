"""The ``stark-mcp`` command: one typer app, one module per group of subcommands.

Each ``*_cmd`` module defines its commands as module-level functions and a ``register(app)``
that only attaches them. Everything heavy (torch, the MCP SDK, the store) is imported inside
the command that needs it, so ``--help`` and ``--version`` start in a fraction of a second.
"""

from __future__ import annotations

import logging
import sys

import typer

from stark_mcp import __version__
from stark_mcp.cli import (
    bench_cmd,
    daemon_cmd,
    doctor_cmd,
    eval_cmd,
    memory_cmd,
    problem_cmd,
    report_cmd,
    run_cmd,
    runs_cmd,
    serve_cmd,
    verify_cmd,
)
from stark_mcp.errors import StarkError

app = typer.Typer(
    name="stark-mcp",
    help="Faster PyTorch modules from LLM-written kernels, proven by a trusted evaluator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"stark-mcp {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Faster PyTorch modules from LLM-written kernels, proven by a trusted evaluator."""
    # An explicit callback keeps typer from collapsing the app into its only command.


for _group in (
    eval_cmd, run_cmd, runs_cmd, serve_cmd, bench_cmd, report_cmd, doctor_cmd, problem_cmd, memory_cmd,
    verify_cmd, daemon_cmd,
):
    _group.register(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Logs go to stderr: stdout may be an MCP stdio stream.

    The level is WARNING until a command reads the settings (``STARK_LOG_LEVEL``).
    """
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s")
    try:
        app(args=argv, standalone_mode=True)
    except StarkError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
