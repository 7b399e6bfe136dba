"""``stark-mcp serve``: the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import typer
from pydantic import ValidationError

from stark_mcp.evaluator import BASELINE_NAMES, EvalSettings


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        http: bool = typer.Option(False, "--http", help="Speak streamable HTTP at /mcp instead of stdio."),
        host: str = typer.Option("127.0.0.1", "--host", help="HTTP: address to bind (loopback unless told)."),
        port: int = typer.Option(8000, "--port", help="HTTP: port to listen on."),
        token: str | None = typer.Option(
            None, "--token", envvar="STARK_MCP_TOKEN",
            help="HTTP: require 'Authorization: Bearer TOKEN' on every request.",
        ),
        baselines: str | None = typer.Option(
            None, "--baselines",
            help=f"Comma-separated baselines to time (default all: {','.join(BASELINE_NAMES)}).",
        ),
    ) -> None:
        """Run the MCP server. Hosts launch it over stdio: `stark-mcp serve`."""
        # Imported here so that other subcommands never load the MCP SDK.
        from stark_mcp.server import build_server
        from stark_mcp.server.transports import exposure_warning, serve_http, serve_stdio

        settings = None
        if baselines is not None:
            names = tuple(b.strip() for b in baselines.split(",") if b.strip())
            try:
                settings = EvalSettings(baselines=names)
            except ValidationError as exc:
                raise typer.BadParameter(exc.errors()[0]["msg"], param_hint="--baselines") from None
        server = build_server(eval_settings=settings)
        if not http:
            serve_stdio(server)
            return
        warning = exposure_warning(host, token)
        if warning:
            typer.echo(f"warning: {warning}", err=True)
        serve_http(server, host=host, port=port, token=token)
