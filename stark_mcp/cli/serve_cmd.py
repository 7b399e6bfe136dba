"""``stark-mcp serve``: the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import typer

from stark_mcp.cli.context import (
    EXECUTOR_HELP,
    GPUS_HELP,
    RAY_ADDRESS_HELP,
    scaled,
    settings_of,
    user_errors,
)


def serve_command(
    ctx: typer.Context,
    http: bool = typer.Option(False, "--http", help="Speak streamable HTTP at /mcp instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP: address to bind (loopback unless told)."),
    port: int = typer.Option(8000, "--port", help="HTTP: port to listen on."),
    token: str | None = typer.Option(
        None, "--token", help="HTTP: require 'Authorization: Bearer TOKEN' on every request "
        "(default: STARK_MCP_TOKEN).",
    ),
    baselines: str | None = typer.Option(
        None, "--baselines", help="Comma-separated baselines to time (default: all of them).",
    ),
    eval_settings_json: str | None = typer.Option(
        None, "--eval-settings", help="JSON object of evaluator settings (trials, timeouts, ...) for "
        "every evaluation this server runs.",
    ),
    gpus: str | None = typer.Option(None, "--gpus", help=GPUS_HELP),
    executor: str | None = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    roots: list[str] = typer.Option(
        [], "--root", help="A folder clients' paths may name, besides the working folder (repeatable).",
    ),
    problem_sources: bool = typer.Option(
        False, "--allow-problem-source", help="Accept a problem given as text in create_run at every "
        "isolation level (default: only where the evaluator jails problem code, isolation sandbox or "
        "uid; elsewhere only problem files inside the roots).",
    ),
) -> None:
    """Run the MCP server. Hosts launch it over stdio: `stark-mcp serve`."""
    # Imported here so that other subcommands never load the MCP SDK.
    from stark_mcp.orchestrator.session import parse_eval_settings
    from stark_mcp.server import build_server
    from stark_mcp.server.transports import exposure_warning, serve_http, serve_stdio

    settings = scaled(settings_of(ctx), gpus, executor, ray_address)
    with user_errors():
        eval_settings = (
            parse_eval_settings(baselines, eval_settings_json)
            if baselines is not None or eval_settings_json is not None else None
        )
        server = build_server(
            settings, eval_settings=eval_settings, roots=roots, problem_sources=problem_sources
        )
    if not http:
        serve_stdio(server)
        return
    token = token or (settings.mcp_token.get_secret_value() if settings.mcp_token else None)
    warning = exposure_warning(host, token)
    if warning:
        typer.echo(f"warning: {warning}", err=True)
    serve_http(server, host=host, port=port, token=token)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
