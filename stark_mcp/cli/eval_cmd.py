"""``stark-mcp eval PROBLEM CANDIDATE``: one trusted evaluation from the command line.

stdout carries only the verdict (or its JSON); the evaluator's phases show on stderr as it works.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stark_mcp.cli.context import DEVICE_HELP, check_device, fail, settings_of, user_errors
from stark_mcp.cli.display import PhaseDisplay

if TYPE_CHECKING:
    from stark_mcp.config import Settings
    from stark_mcp.orchestrator.session import EvalSettings
    from stark_mcp.records import Evaluation, ProfileReport, TrustReport


# The exit status per verdict, for scripts (docs/running.md): 0 only when the candidate passed; 1 when
# it ran and is wrong or was refused (wrong_output, rejected); 3 when it did not get as far as a
# verdict on its outputs (build, load, runtime error, timeout). 2 stays the usage / problem error.
EXIT_CODES = {
    "passed": 0, "wrong_output": 1, "rejected": 1,
    "build_error": 3, "load_error": 3, "runtime_error": 3, "timeout": 3,
}


def exit_code(status: str) -> int:
    return EXIT_CODES.get(status, 3)


def _parses(source: str) -> bool:
    from stark_mcp.python_ast import parse

    try:
        parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def trust_lines(trust: TrustReport) -> list[str]:
    """What the trusted side checked: the isolation level, the calls it verified, both clocks."""
    note = f" ({trust.isolation_note})" if trust.isolation_note else ""
    lines = [f"isolation: {trust.isolation}{note}"]
    if trust.calls:
        lines.append(f"checked: {trust.checked_calls}/{trust.calls} calls compared by the trusted side, "
                     f"{trust.timed_checked}/{trust.timed_calls} timed calls picked at random")
    if trust.external_ms is not None:
        reported = f"{trust.reported_ms:.4g} ms" if trust.reported_ms is not None else "nothing"
        overhead = f", protocol overhead {trust.overhead_ms:.3g} ms" if trust.overhead_ms is not None else ""
        side = "; eager re-timed side by side" if trust.baseline_side_by_side else ""
        lines.append(f"clocks: candidate reported {reported}, trusted bound {trust.external_ms:.4g} ms"
                     f"{overhead}{side}")
    lines += [f"finding: {finding}" for finding in trust.findings]
    return lines


def summary(ev: Evaluation) -> str:
    lines = [f"{ev.status.value}" + (f" ({ev.reason})" if ev.reason else "") + f": {ev.message}"]
    if ev.runtime is not None:
        lines.append(f"runtime: {ev.runtime.median_ms:.4g} ms median, IQR {ev.runtime.iqr_ms:.3g} ms, "
                     f"{ev.runtime.samples} calls on {ev.device_name} ({ev.device})")
    for name, stats in ev.baselines.items():
        speed = f", speedup {ev.speedups[name]:.3g}x" if name in ev.speedups else ""
        lines.append(f"baseline {name}: {stats.median_ms:.4g} ms{speed}")
    if len(ev.shapes) > 1:
        count = len(ev.shapes)
        lines.append(f"input sets ({count}; the runtime and speedups above are their geometric mean):")
        for shape in ev.shapes:
            runtime = f"{shape.runtime.median_ms:.4g} ms" if shape.runtime else "not timed"
            speed = ", ".join(f"{name} {value:.3g}x" for name, value in shape.speedups.items())
            lines.append(f"  {shape.label}: {runtime}" + (f", speedup {speed}" if speed else ""))
    c = ev.correctness
    if c is not None and c.rel_norm_error is not None:
        lines.append(f"correctness: {c.trials_passed}/{c.trials} trials, rel error {c.rel_norm_error:.3g} "
                     f"(tolerance {c.tolerance:.3g}), allclose 1e-2 {c.allclose_1e2}, 1e-4 {c.allclose_1e4}")
    if ev.flags:
        lines.append("flags: " + ", ".join(ev.flags))
    pending = [f.split(":", 1)[1] for f in ev.flags if f.startswith("baseline_pending:")]
    if pending:
        lines.append(f"not timed: {', '.join(pending)} (not cached for this problem yet; time them with "
                     f"--baselines eager,{','.join(pending)})")
    if ev.profile is not None:
        lines.append(profile_text(ev.profile))
    if ev.trust is not None:
        lines += trust_lines(ev.trust)
    if ev.cached:
        lines.append("(cached result)")
    elif ev.reevaluated:
        lines.append(f"({ev.reevaluated})")
    for phase, text in ev.logs.items():
        if not ev.passed and text:
            lines.append(f"--- {phase} log ---\n{text}")
    return "\n".join(lines)


def profile_text(report: ProfileReport) -> str:
    from stark_mcp.agents.profiles import describe, render_profile_table

    return "profile:\n" + (render_profile_table([("this", report)], per_node=8) or "- " + describe(report))


def eval_command(
    ctx: typer.Context,
    problem: str = typer.Argument(..., help="problem file, JSONL:LEVEL/ID or KernelBench checkout:LEVEL/ID"),
    candidate: Path = typer.Argument(..., help="candidate source defining ModelNew"),
    device: str | None = typer.Option(None, "--device", help=DEVICE_HELP, callback=check_device),
    as_json: bool = typer.Option(False, "--json", help="print the Evaluation as one JSON object"),
    baselines: str | None = typer.Option(
        None, "--baselines", help="comma-separated baselines to time (default: eager, and the compile "
        "baselines already timed for this problem)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="re-evaluate even if a result is cached"),
    profile: bool = typer.Option(
        False, "--profile", help="GPU: profile a passing candidate's kernels after printing the verdict"),
    no_daemon: bool = typer.Option(
        False, "--no-daemon", help="evaluate in this process, not in the warm evaluator (default: "
        "STARK_EVAL_DAEMON, else the warm evaluator, started on first use)"),
) -> None:
    """Build, check and time CANDIDATE against PROBLEM in isolated processes. Exit status: 0 passed,
    1 wrong_output or rejected, 3 build/load/runtime error or timeout, 2 bad arguments or problem.

    The evaluation runs in this user's warm evaluator (a daemon keeping torch, CUDA and the workers
    warm; `stark-mcp daemon status|stop`), started on first use, or in this process with --no-daemon."""
    from stark_mcp.orchestrator.early_start import start_zygote

    settings = settings_of(ctx)
    warm = settings.eval_daemon and not no_daemon
    if not warm:
        # First, before this command's heavy imports and the problem's load: the zygote's own import
        # of torch is what a fresh process's first evaluation would otherwise wait for.
        start_zygote(settings)
    from stark_mcp.orchestrator.eval_options import parse_eval_settings

    with user_errors():
        eval_settings = parse_eval_settings(baselines)
    try:
        source = candidate.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise fail(f"{candidate}: not a candidate file (a Python file defining class ModelNew)") from None
    except OSError as exc:
        raise fail(f"cannot read candidate {candidate}: {exc.strerror or exc}") from None
    if candidate.resolve().suffix != ".py" and not _parses(source):
        # Not meant as Python: the verdict would quote the offending line of whatever file it is.
        raise fail(f"{candidate}: not a candidate file (a Python file defining class ModelNew)")
    display = PhaseDisplay(prefix="eval: ")

    def show(evaluation: Evaluation) -> None:
        typer.echo(evaluation.model_dump_json() if as_json else summary(evaluation))

    def show_profile(report: ProfileReport) -> None:
        # --json: the verdict's line, then the profile's own line (the verdict never waits for it)
        typer.echo(report.model_dump_json() if as_json else profile_text(report))

    def waiting(jobs: int) -> None:
        display.show("eval: finishing the shared precompiled header for later builds "
                     "(Ctrl-C skips it; the next eval would start it again)")

    device = device or settings.device
    if warm:
        evaluation = evaluate_warm(
            settings, problem, source, device, eval_settings, no_cache, baselines, profile, display, show,
            show_profile,
        )
        if evaluation is not None:
            raise typer.Exit(exit_code(evaluation.status.value))
        start_zygote(settings)
    from stark_mcp.orchestrator.session import evaluate_candidate

    with user_errors(), display.showing():
        evaluation = asyncio.run(evaluate_candidate(
            settings, problem, source, device=device, eval_settings=eval_settings,
            use_cache=not no_cache, progress=display.on_phase, on_result=show, waiting=waiting,
            wait_for_baselines=baselines is not None, profile=profile, on_profile=show_profile,
        ))
    raise typer.Exit(exit_code(evaluation.status.value))


def evaluate_warm(
    settings: Settings, problem: str, source: str, device: str, eval_settings: EvalSettings, no_cache: bool,
    baselines: str | None, profile: bool, display: PhaseDisplay, show: Callable[[Evaluation], None],
    show_profile: Callable[[ProfileReport], None],
) -> Evaluation | None:
    """The evaluation by the warm evaluator, or None where the caller should evaluate in-process
    (none could take it, or it stopped before its verdict: said on stderr)."""
    from stark_mcp.orchestrator import warm_client
    from stark_mcp.orchestrator.errors import WarmEvaluatorLost, WarmEvaluatorUnavailable
    from stark_mcp.records import Evaluation

    with user_errors(), display.showing():
        try:
            return asyncio.run(warm_client.evaluate_warm(
                settings, problem, source, device=device, eval_settings=eval_settings,
                use_cache=not no_cache, progress=display.on_phase, on_result=show,
                wait_for_baselines=baselines is not None, profile=profile, on_profile=show_profile,
            ))
        except WarmEvaluatorUnavailable as exc:
            display.line(f"eval: no warm evaluator ({exc}); evaluating in this process")
        except WarmEvaluatorLost as exc:
            verdict = exc.verdict
            if isinstance(verdict, Evaluation):  # printed already; only its profile is missing
                display.line(f"eval: the warm evaluator stopped after the verdict ({exc}); no profile")
                return verdict
            display.line(f"eval: the warm evaluator stopped mid-evaluation ({exc}); evaluating in this "
                         "process")
    return None


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
