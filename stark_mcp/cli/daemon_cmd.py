"""``stark-mcp daemon status|stop|settle``: this user's warm evaluators, which ``stark-mcp eval`` starts."""

from __future__ import annotations

import asyncio
import time

import typer

from stark_mcp.cli.context import settings_of, user_errors

daemon_app = typer.Typer(
    help="This user's warm evaluators: the daemons `stark-mcp eval` starts on first use and reuses "
    "(one per compatibility key; each exits after STARK_EVAL_DAEMON_IDLE_S idle).",
    no_args_is_help=True,
)


@daemon_app.command("status")
def status_command(ctx: typer.Context) -> None:
    """List the warm evaluators: pid, whether this shell's eval would use it, uptime, evaluations."""
    from stark_mcp.orchestrator import warm_client

    with user_errors():
        states = asyncio.run(warm_client.daemons(settings_of(ctx)))
    if not states:
        typer.echo("no warm evaluator running (the next `stark-mcp eval` starts one)")
        return
    for state in states:
        s = state.status
        use = "used by eval here" if state.compatible else "another key (other code, settings or environment)"
        if s is None:
            typer.echo(f"{state.socket}: not answering (stale; the next eval with its key replaces it)")
            continue
        typer.echo(f"pid {s.pid}: {use}; up {time.time() - s.started:.0f} s, {s.active} evaluating, "
                   f"{s.served} served, exits after {s.idle_timeout_s:g} s idle; log {s.log}")


@daemon_app.command("stop")
def stop_command(
    ctx: typer.Context,
    every: bool = typer.Option(False, "--all", help="stop every warm evaluator of this user, not only "
                               "the one this shell's eval uses"),
) -> None:
    """Stop the warm evaluator this shell's eval uses (--all: every one); it exits after its socket's
    removal, and the next eval starts a new one."""
    from stark_mcp.orchestrator import warm_client

    async def stopping() -> list[int]:
        states = await warm_client.daemons(settings_of(ctx))
        stopped = []
        for state in states:
            if (every or state.compatible) and state.status is not None:
                pid = await warm_client.stop(state.socket)
                if pid is not None:
                    stopped.append(pid)
        return stopped

    with user_errors():
        stopped = asyncio.run(stopping())
    typer.echo(f"stopped pid {', '.join(map(str, stopped))}" if stopped else "no warm evaluator to stop")


@daemon_app.command("settle")
def settle_command(ctx: typer.Context) -> None:
    """Wait until the warm evaluator this shell's eval uses has finished the background work its
    evaluations started (the shared precompiled header a first build makes), so the next build uses it."""
    from stark_mcp.orchestrator import warm_client

    async def settling() -> int | None:
        for state in await warm_client.daemons(settings_of(ctx)):
            if state.compatible and state.status is not None:
                return await warm_client.settle(state.socket)
        return None

    with user_errors():
        jobs = asyncio.run(settling())
    typer.echo("no warm evaluator here" if jobs is None else f"settled ({jobs} background jobs were running)")


def register(app: typer.Typer) -> None:
    app.add_typer(daemon_app, name="daemon")
