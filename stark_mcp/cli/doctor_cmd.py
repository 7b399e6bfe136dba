"""``stark-mcp doctor``: what this machine gives the evaluator, and how to get more.

It answers the questions a user has before trusting a number: which isolation level candidates
run at (and why not a stronger one), which devices and toolchains exist, where data is kept.
Exit 1 when the configured isolation cannot be had here; the evaluator would refuse to start.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import typer
from pydantic import BaseModel, Field

from stark_mcp.cli.context import settings_of

if TYPE_CHECKING:
    from stark_mcp.config import Settings

TOOLS = ("nvcc", "ninja", "ncu", "compute-sanitizer", "bwrap", "setpriv", "prlimit")
OUTSIDE_TOOLS = ("ncu", "compute-sanitizer")
TOOL_TIMEOUT_S = 10


class ToolCheck(BaseModel):
    name: str
    path: str | None = None
    version: str = ""


class DoctorReport(BaseModel):
    version: str
    python: str
    torch: str
    cuda_devices: list[str] = Field(default_factory=list, description="names of the visible GPUs")
    triton: str | None = None
    tools: list[ToolCheck] = Field(default_factory=list)
    isolation_requested: str
    isolation: str | None = Field(None, description="the level candidates will run at; None: refused")
    isolation_lines: list[str] = Field(default_factory=list)
    isolation_error: str | None = None
    home: str
    database: str
    cache: str
    toolchain: str
    prepared: list[str] | None = Field(
        None, description="--prepare: what was made (empty: all of it was made before)")

    @property
    def ok(self) -> bool:
        return self.isolation is not None


def _version_line(path: str) -> str:
    try:
        proc = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line.strip() for line in (proc.stdout or proc.stderr).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def gather(settings: Settings) -> DoctorReport:
    import torch

    from stark_mcp import __version__
    from stark_mcp.orchestrator.session import isolation_report, tool_paths

    devices = []
    if torch.cuda.is_available():
        devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    outside = tool_paths(settings)  # the profiler and sanitizer where the evaluator looks for them
    tools = []
    for name in TOOLS:
        path = outside.find(name) if name in OUTSIDE_TOOLS else shutil.which(name)
        tools.append(ToolCheck(name=name, path=path, version=_version_line(path) if path else ""))
    report = DoctorReport(
        version=__version__,
        python=sys.version.split()[0],
        torch=torch.__version__,
        cuda_devices=devices,
        triton=triton_version,
        tools=tools,
        isolation_requested=settings.isolation,
        home=str(settings.home),
        database=str(settings.database),
        cache=str(settings.cache),
        toolchain=str(settings.toolchain),
    )
    report.isolation, report.isolation_lines, report.isolation_error = isolation_report(settings)
    return report


def render(report: DoctorReport) -> str:
    lines = [f"stark-mcp {report.version} (python {report.python}, torch {report.torch})"]
    lines.append(
        "devices: "
        + (
            ", ".join(report.cuda_devices)
            if report.cuda_devices
            else "no CUDA device visible: evaluations run on the CPU"
        )
    )
    lines.append(f"triton: {report.triton or 'not installed (Triton candidates need a GPU and triton)'}")
    for tool in report.tools:
        lines.append(
            f"  {tool.name}: {tool.path or 'not found'}" + (f" ({tool.version})" if tool.version else "")
        )
    if report.isolation_error:
        lines.append(f"isolation: REFUSED ({report.isolation_requested} requested): {report.isolation_error}")
    else:
        lines += report.isolation_lines
        if report.isolation_requested != "auto":
            lines.append(f"  (STARK_ISOLATION={report.isolation_requested})")
    lines += [f"data: {report.home}", f"  database: {report.database}", f"  cache: {report.cache}"]
    lines.append(f"  toolchain: {report.toolchain}")
    if report.prepared is not None:
        lines.append("prepared: " + ("; ".join(report.prepared) or "nothing to make, all made before"))
    return "\n".join(lines)


def doctor_command(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="print the report as one JSON object"),
    prepare: bool = typer.Option(
        False, "--prepare", help="also make now the shared build files (precompiled header) that a first "
        "extension build on this machine would make inside an agent's attempt"),
) -> None:
    """Show the isolation level candidates run at, the devices and toolchains, and where data lives."""
    settings = settings_of(ctx)
    report = gather(settings)
    if prepare and report.ok:
        report.prepared = prepare_builds(settings)
    typer.echo(report.model_dump_json() if as_json else render(report))
    if not report.ok:
        raise typer.Exit(1)


def prepare_builds(settings: Settings) -> list[str]:
    """``Evaluator.prepare`` on the configured device (the GPU where there is one)."""
    import asyncio

    from stark_mcp.orchestrator.session import open_evaluator

    async def run() -> list[str]:
        async with open_evaluator(settings) as evaluator:
            return await evaluator.prepare(settings.device)

    return asyncio.run(run())


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)
