"""``stark-mcp verify``: do a kernel's recorded figures hold when it is evaluated again from scratch?

The record is an ``Evidence``: what a node's evaluation found (the candidate's time and the eager
baseline timed side by side with it, their IQRs, the speedup), where (device, isolation level, the
evaluator's code digest, torch, CUDA, the driver) and when. It is read from the run's database row
(``stark-mcp verify RUN``) or from the block an exported file carries (``STARK_EVIDENCE``,
``stark-mcp verify best_kernel.py``). The kernel is then evaluated afresh, in a cache of its own, by
the same evaluator settings, and ``compare`` says whether the figures hold (pure):

- the kernel must pass again (else exit ``EXIT_NO_LONGER_PASSES``);
- the recorded speedup must follow from the recorded times (eager median / kernel median): a speedup
  edited after the fact does not (exit ``EXIT_DOES_NOT_HOLD``);
- the speedup over eager measured now must lie within a factor ``1 + tol`` of the recorded one, where
  ``tol = tolerance + IQR/median of the recorded kernel time + IQR/median of the recorded eager
  time`` (``tolerance``: ``TOLERANCE`` unless given). Both are timed side by side in one session, so
  the ratio is what survives a machine's load; absolute times do not, and are checked only on the
  same device model, within a factor ``1 + TIME_TOLERANCE + tol`` (exit ``EXIT_DOES_NOT_HOLD``).

Anything else that differs (the evaluator's code, torch, the driver) is said, not failed on.
"""

from __future__ import annotations

import ast
import math
import pprint
from datetime import UTC, datetime

from pydantic import BaseModel, Field, ValidationError

from stark_mcp import python_ast
from stark_mcp.evaluator.host.verdict_dependencies import changes
from stark_mcp.orchestrator.errors import InvalidInput
from stark_mcp.problems import source_hash
from stark_mcp.records import Dependencies, Evaluation, Node, RunRecord, TimingStats

TOLERANCE = 0.25  # share by which a speedup measured again may differ beyond the recorded IQRs
TIME_TOLERANCE = 1.0  # absolute times, same device: a factor of two beyond that (machine load)
CONSISTENT = 1e-3  # a recorded speedup and its recorded times agree to this share (rounding only)
EXIT_HOLDS = 0
EXIT_DOES_NOT_HOLD = 3
EXIT_NO_LONGER_PASSES = 4
EVIDENCE_NAME = "STARK_EVIDENCE"


class Evidence(BaseModel):
    """A passing kernel's recorded figures and everything they depend on."""

    format: int = 1
    run_id: str | None = None
    node_id: str | None = None
    problem_name: str
    problem_source: str = Field(description="the problem's text: verify rebuilds the problem from it")
    problem_hash: str
    kernel_hash: str = Field(description="source hash of the kernel as it was evaluated")
    status: str
    device: str = Field(description="cpu or cuda")
    device_name: str
    isolation: str | None = None
    runtime: TimingStats
    eager: TimingStats | None = None
    speedups: dict[str, float] = Field(default_factory=dict)
    dependencies: Dependencies | None = None
    eval_settings: dict[str, object] = Field(default_factory=dict, description="the run's evaluator settings")
    recorded_at: str = ""


class FigureCheck(BaseModel):
    name: str
    recorded: float
    fresh: float
    allowed: float = Field(description="the factor by which they may differ, either way")
    holds: bool
    checked: bool = True


class Verification(BaseModel):
    subject: str
    status: str
    message: str = ""
    figures: list[FigureCheck] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    exit_code: int = EXIT_HOLDS

    @property
    def holds(self) -> bool:
        return self.exit_code == EXIT_HOLDS


def _date(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if timestamp else ""


def evidence_of(run: RunRecord, node: Node) -> Evidence:
    """The evidence of a passing node; ``InvalidInput`` for one with no time to check."""
    evaluation = node.evaluation
    if evaluation is None or not evaluation.passed or evaluation.runtime is None:
        verdict = "not evaluated" if evaluation is None else evaluation.status.value
        raise InvalidInput(f"node {node.id} of run {run.id} did not pass ({verdict}): no figures to verify")
    isolation = evaluation.trust.isolation if evaluation.trust is not None else None
    return Evidence(
        run_id=run.id,
        node_id=node.id,
        problem_name=run.problem.name,
        problem_source=run.problem.source,
        problem_hash=run.problem.hash,
        kernel_hash=source_hash(node.source),
        status=evaluation.status.value,
        device=evaluation.device or run.device,
        device_name=evaluation.device_name,
        isolation=isolation or (evaluation.dependencies.isolation if evaluation.dependencies else None),
        runtime=evaluation.runtime,
        eager=evaluation.baselines.get("eager"),
        speedups={k: v for k, v in evaluation.speedups.items() if math.isfinite(v)},
        dependencies=evaluation.dependencies,
        eval_settings=dict(run.config.get("eval_settings", {})),
        recorded_at=_date(node.created_at),
    )


def evidence_block(evidence: Evidence) -> str:
    """The block an exported file carries: a module-level literal ``verify`` reads back. The same
    node always gives the same block (the MCP tool's export and the CLI's are the same file)."""
    data = evidence.model_dump(mode="json", exclude={"problem_source"})
    data["problem_source"] = evidence.problem_source  # last: the long one
    return (
        "\n\n# ---- evidence added by `stark-mcp export`: the recorded figures and what they depend on; "
        "`stark-mcp verify THIS_FILE` checks them ----\n"
        f"{EVIDENCE_NAME} = {pprint.pformat(data, sort_dicts=False, width=100)}\n"
    )


def read_evidence(text: str, where: str) -> Evidence:
    """The ``STARK_EVIDENCE`` block of an exported file; ``InvalidInput`` naming what is wrong."""
    try:
        tree = python_ast.parse(text)
    except SyntaxError as exc:
        raise InvalidInput(f"{where}: not Python ({exc.msg} at line {exc.lineno})") from None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == EVIDENCE_NAME
        ):
            try:
                data = ast.literal_eval(node.value)
                return Evidence.model_validate(data)
            except (ValueError, TypeError, SyntaxError, AttributeError, ValidationError) as exc:
                raise InvalidInput(f"{where}: its {EVIDENCE_NAME} block is malformed: {exc}") from None
    raise InvalidInput(
        f"{where} carries no {EVIDENCE_NAME} block (files exported by `stark-mcp export` do); "
        "verify a run instead: stark-mcp verify RUN_ID"
    )


def _factor(a: float, b: float) -> float:
    if a <= 0 or b <= 0:
        return math.inf
    return max(a / b, b / a)


def _spread(stats: TimingStats | None) -> float:
    if stats is None or stats.median_ms <= 0:
        return 0.0
    return stats.iqr_ms / stats.median_ms


def compare(
    evidence: Evidence, fresh: Evaluation, tolerance: float = TOLERANCE, subject: str = ""
) -> Verification:
    """Whether ``evidence`` holds against ``fresh``, the kernel evaluated again (module docstring)."""
    result = Verification(subject=subject, status=fresh.status.value, message=fresh.message)
    if not fresh.passed or fresh.runtime is None:
        result.problems.append(f"the kernel no longer passes: {fresh.status.value}: {fresh.message}")
        result.exit_code = EXIT_NO_LONGER_PASSES
        return result
    tol = tolerance + _spread(evidence.runtime) + _spread(evidence.eager)
    recorded_speedup = evidence.speedups.get("eager")
    if evidence.eager is not None and recorded_speedup is not None and evidence.runtime.median_ms > 0:
        implied = evidence.eager.median_ms / evidence.runtime.median_ms
        if abs(recorded_speedup - implied) > CONSISTENT * implied:
            result.problems.append(
                f"the recorded speedup {recorded_speedup:.4g}x does not follow from the recorded times "
                f"(eager {evidence.eager.median_ms:.4g} ms / kernel {evidence.runtime.median_ms:.4g} ms "
                f"= {implied:.4g}x): the record was changed after it was made"
            )
    fresh_eager = fresh.baselines.get("eager")
    fresh_speedup = fresh.speedups.get("eager")
    if recorded_speedup is not None and fresh_speedup is not None:
        check = FigureCheck(name="speedup vs eager (x)", recorded=recorded_speedup, fresh=fresh_speedup,
                            allowed=1 + tol, holds=_factor(recorded_speedup, fresh_speedup) <= 1 + tol)
        result.figures.append(check)
        if not check.holds:
            result.problems.append(
                f"speedup vs eager: recorded {recorded_speedup:.4g}x, measured now {fresh_speedup:.4g}x "
                f"(allowed: a factor {1 + tol:.3g} either way)"
            )
    same_device = evidence.device_name == fresh.device_name
    if not same_device:
        result.notes.append(
            f"recorded on {evidence.device_name}, verified on {fresh.device_name}: "
            "absolute times not compared"
        )
    time_tol = 1 + TIME_TOLERANCE + tol
    times = [("kernel median (ms)", evidence.runtime, fresh.runtime), ("eager median (ms)", evidence.eager,
                                                                      fresh_eager)]
    for name, before, now in times:
        if before is None or now is None:
            continue
        holds = _factor(before.median_ms, now.median_ms) <= time_tol
        check = FigureCheck(name=name, recorded=before.median_ms, fresh=now.median_ms, allowed=time_tol,
                            holds=holds or not same_device, checked=same_device)
        result.figures.append(check)
        if not check.holds:
            result.problems.append(
                f"{name}: recorded {before.median_ms:.4g}, measured now {now.median_ms:.4g} "
                f"(allowed: a factor {time_tol:.3g} either way on the same device)"
            )
    if fresh.dependencies is not None and evidence.dependencies is not None:
        result.notes += [f"since the record: {what}" for what in changes(evidence.dependencies,
                                                                           fresh.dependencies)]
    if evidence.kernel_hash and fresh.source_hash and evidence.kernel_hash != fresh.source_hash:
        result.notes.append("the kernel verified is not byte for byte the one recorded "
                            f"({evidence.kernel_hash} recorded, {fresh.source_hash} now)")
    if result.problems:
        result.exit_code = EXIT_DOES_NOT_HOLD
    return result


def render(result: Verification) -> str:
    lines = [f"verify {result.subject}: evaluated afresh (a cache of its own): {result.status}"]
    if result.figures:
        lines.append(f"{'figure':<22} {'recorded':>12} {'now':>12} {'allowed':>9}  verdict")
        for f in result.figures:
            verdict = ("holds" if f.holds else "DOES NOT HOLD") if f.checked else "not compared"
            allowed = "x" + format(f.allowed, ".3g")
            lines.append(f"{f.name:<22} {f.recorded:>12.4g} {f.fresh:>12.4g} {allowed:>9}  {verdict}")
    lines += [f"problem: {p}" for p in result.problems]
    lines += [f"note: {n}" for n in result.notes]
    lines.append(
        "the recorded figures hold" if result.holds
        else f"the recorded figures do NOT hold (exit {result.exit_code})"
    )
    return "\n".join(lines)
