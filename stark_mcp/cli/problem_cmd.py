"""``stark-mcp problem new``: a problem file from the user's own module or function.

stdout carries the result (a short summary, or JSON with ``--json``); progress goes to stderr.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stark_mcp.cli.context import DEVICE_HELP, check_device, settings_of, user_errors

if TYPE_CHECKING:
    from stark_mcp.orchestrator.own_module import CreatedProblem

INPUT_HELP = (
    "a forward argument, in call order: NAME:DTYPE[DIMS] with an optional ~normal(mean,std), "
    "~uniform(lo,hi), ~randint(lo,hi), ~bernoulli(p), ~ones or ~zeros; DIMS are sizes or shape keys, "
    "e.g. x:float32[batch,seq,512]; or NAME=VALUE for a plain value"
)


def new_command(
    ctx: typer.Context,
    target: str | None = typer.Argument(
        None, help="package.module:ClassOrFunction, e.g. mylib.layers:ScaledMLP (optional with --capture)"
    ),
    init: str = typer.Option(
        "", "--init", help='constructor arguments as in a call, e.g. "512, 2048, dropout=0.0"'
    ),
    inputs: list[str] = typer.Option([], "--input", help=INPUT_HELP),
    shapes: list[str] = typer.Option(
        [], "--shape", help="one input set, e.g. batch=8,seq=128; repeat the option"
    ),
    captures: list[str] = typer.Option(
        [], "--capture", help="a file saved by stark_mcp.capture; repeat for several input sets"
    ),
    captured_values: bool = typer.Option(
        False, "--captured-values", help="feed captured floats as they are (default: fresh values like them)"
    ),
    dtype: str | None = typer.Option(None, "--dtype", help="convert the module's parameters, e.g. bfloat16"),
    project: Path | None = typer.Option(
        None, "--project", help="the project folder (default: the current one)"
    ),
    roots: list[str] = typer.Option(
        [], "--root", help="a folder to import the package from (default: PROJECT/src or PROJECT)"
    ),
    out: str | None = typer.Option(
        None, "--out", help="problem file to write (default stark-problems/NAME.py)"
    ),
    name: str | None = typer.Option(None, "--name", help="the problem's name (default from the target)"),
    device: str | None = typer.Option(
        None, "--device", help=f"where to run the problem once: {DEVICE_HELP}", callback=check_device
    ),
    no_check: bool = typer.Option(False, "--no-check", help="write the file without running it once"),
    force: bool = typer.Option(False, "--force", help="replace an existing different problem file"),
    as_json: bool = typer.Option(False, "--json", help="print the result as one JSON object"),
) -> None:
    """Make a problem from your own module or function: it imports TARGET, writes a readable problem
    file, runs it once, and prints the command that optimizes it."""
    from stark_mcp.orchestrator.own_module import problem_request
    from stark_mcp.orchestrator.session import create_user_problem
    from stark_mcp.usercode.specs import parse_call, parse_shape

    settings = settings_of(ctx)
    root = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        init_args, init_kwargs = parse_call(init)
        request = problem_request(
            target=target,
            project_root=str(root),
            import_roots=[str(Path(r).expanduser().resolve()) for r in roots],
            init_args=init_args,
            init_kwargs=init_kwargs,
            inputs=list(inputs),
            shapes=[parse_shape(s) for s in shapes],
            captures=list(captures),
            captured_values=captured_values,
            module_dtype=dtype,
            name=name,
            out=out,
            overwrite=force,
        )
        created = asyncio.run(
            create_user_problem(
                settings,
                request,
                device=device or settings.device,
                check=not no_check,
                progress=_progress,
            )
        )
    typer.echo(json.dumps(created.model_dump(exclude={"source"}), indent=2) if as_json else summary(created))


def summary(created: CreatedProblem) -> str:
    checked = f"ran once on {created.checked_on}" if created.checked_on else "not run (--no-check)"
    lines = [
        f"wrote {created.path}",
        f"  {created.name}: {created.target} ({created.kind}), {checked}",
        f"  constructor arguments: {created.init_inputs}" if created.kind == "module" else "",
        "  input sets:",
        *(f"    {label}: {text}" for label, text in created.shapes.items()),
        f"next: stark-mcp run {created.path}",
    ]
    return "\n".join(line for line in lines if line)


async def _progress(done: float, total: float | None, message: str) -> None:
    typer.echo(message, err=True)


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Problems from your own code.", no_args_is_help=True)
    group.command("new")(new_command)
    app.add_typer(group, name="problem")
