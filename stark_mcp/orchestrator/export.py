"""Turn a node into a runnable file: the kernel, plus a self-check against the reference.

The exported file imports as the candidate module (``ModelNew``) and, run as a script, builds
both modules with the same weights, compares them on fresh inputs and times both under the
evaluator's conditions (``self_check.py``). The reference is embedded as a string so the file
stands alone. Only a node that passed is exported; one slower than eager comes with a warning.
Every exported file ends with its evidence (``STARK_EVIDENCE``, ``verify.py``): the recorded figures
and what they depend on, which ``stark-mcp verify FILE`` checks by evaluating the file again.
For a problem made from the user's own code by ``problem new``, the file is a drop-in module for
their package instead (``dropin_export``).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from stark_mcp.evaluator import EvalSettings
from stark_mcp.orchestrator.dropin_export import dropin_source, is_dropin
from stark_mcp.orchestrator.errors import ExportRefused
from stark_mcp.orchestrator.self_check import self_check
from stark_mcp.orchestrator.verify import evidence_block, evidence_of
from stark_mcp.records import Action, Node, RunRecord


class ExportedKernel(BaseModel):
    run_id: str
    node_id: str
    runtime_ms: float | None = Field(description="the evaluator's median runtime of the node")
    speedups: dict[str, float] = Field(description="baseline median / node median, by baseline")
    shapes: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="speedups by input set, for a problem declaring several (speedups: their geometric mean)",
    )
    warnings: list[str] = Field(default_factory=list, description="reasons to think twice before using it")
    source: str = Field(
        description="a runnable file: ModelNew plus a __main__ self-check against the reference"
    )


def export_kernel(run: RunRecord, node: Node) -> ExportedKernel:
    """``node`` of ``run`` as a runnable file; ``ExportRefused`` unless it is a correct attempt."""
    evaluation = node.evaluation
    if node.action is Action.ROOT:
        raise ExportRefused(f"{node.id} is the reference module itself; export an attempt instead")
    if evaluation is None or not evaluation.passed or evaluation.runtime is None:
        verdict = "not evaluated" if evaluation is None else evaluation.status.value
        raise ExportRefused(
            f"node {node.id} of run {run.id} did not pass ({verdict}); only a correct kernel is exported. "
            "Read its source and logs with get_node or `stark-mcp show RUN --node NODE`"
        )
    speedups = {k: v for k, v in evaluation.speedups.items() if math.isfinite(v)}
    warnings = []
    eager = speedups.get("eager")
    if eager is not None and eager < 1.0:
        warnings.append(
            f"node {node.id} is slower than eager PyTorch ({eager:.2f}x): the reference itself is faster"
        )
    listed = ", ".join(f"{k} {v:.2f}x" for k, v in sorted(speedups.items()))
    recorded = (
        f"stark-mcp node {run.id}/{node.id}: {evaluation.status.value}, median "
        f"{evaluation.runtime.median_ms:.4f} ms" + (f" ({listed})" if listed else "")
    )
    settings = EvalSettings(**run.config.get("eval_settings", {}))
    conditions = {
        "device": run.device, "cpu_threads": settings.cpu_threads, "calls": settings.min_calls,
        "warmup_s": settings.warmup_s,
        "tolerance": evaluation.correctness.tolerance if evaluation.correctness else None,
    }
    shapes = {s.label: {k: v for k, v in s.speedups.items() if math.isfinite(v)} for s in evaluation.shapes}
    if len(shapes) > 1:
        recorded += "".join(
            f"; {label}: " + ", ".join(f"{k} {v:.2f}x" for k, v in sorted(by.items()))
            for label, by in shapes.items()
        )
    if is_dropin(run.problem):
        source = dropin_source(run.problem, node)
    else:
        header = f"# Exported by stark-mcp from run {run.id}, node {node.id}; problem {run.problem.name}.\n"
        source = header + node.source.rstrip() + "\n" + self_check(run.problem.source, recorded, conditions)
    source = source.rstrip("\n") + "\n" + evidence_block(evidence_of(run, node))  # `stark-mcp verify FILE`
    return ExportedKernel(
        run_id=run.id, node_id=node.id, runtime_ms=evaluation.runtime.median_ms, speedups=speedups,
        shapes=shapes if len(shapes) > 1 else {}, warnings=warnings, source=source,
    )
