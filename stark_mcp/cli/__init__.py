"""The ``stark-mcp`` command: one typer app, one module per subcommand group.

Each module exposes ``register(app)``; this file only wires them together and
turns ``StarkError`` into a one-line message and exit code 2.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys

import typer

from stark_mcp.errors import StarkError

app = typer.Typer(
    name="stark-mcp",
    help="Faster PyTorch modules from LLM-written kernels, proven by a trusted evaluator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

@app.callback()
def _root() -> None:
    """Faster PyTorch modules from LLM-written kernels, proven by a trusted evaluator."""
    # An explicit callback keeps typer from collapsing the app into its only command.


# Every ``*_cmd`` module in this package is a subcommand group defining register(app);
# discovering them keeps the groups independent of each other.
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.endswith("_cmd"):
        importlib.import_module(f"{__name__}.{_info.name}").register(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Logs go to stderr: stdout may be an MCP stdio stream."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app(args=argv, standalone_mode=True)
    except StarkError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
