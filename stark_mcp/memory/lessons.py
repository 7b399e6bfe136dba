"""What one finished run teaches, condensed into an entry, and which entries a new problem gets. Pure.

An entry keeps: the problem's operator signature (``signature.py``), the transformation (the advice
of the plans whose attempts improved on the best so far, in order), the best speedup over eager,
and pitfalls (the first line of the messages of failing attempts, one per distinct failure). The
planner of a new problem gets the ``k`` entries whose signatures overlap its own most (Jaccard),
ties broken by the larger speedup.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from stark_mcp.agents.parsing import split_plan_text
from stark_mcp.memory.signature import jaccard, op_signature
from stark_mcp.records import Action, Node, RunRecord

MAX_TRANSFORMATION = 600  # characters of advice kept per entry
MAX_PITFALLS = 3
MAX_PITFALL = 160


class MemoryEntry(BaseModel):
    run_id: str
    problem_name: str
    problem_hash: str
    ops: list[str] = Field(description="the reference's operator signature, sorted")
    transformation: str = Field(description="advice of the plans that improved the best, condensed")
    speedup: float | None = Field(None, description="the run's best speedup over eager, if it has one")
    pitfalls: list[str] = Field(default_factory=list, description="distinct failures, one line each")
    created_at: float = 0.0


def _advice(plan: str | None) -> str:
    if not plan:
        return ""
    try:
        advice, _scaffold = split_plan_text(plan)
    except Exception:  # noqa: BLE001 - a plan without the scaffold is all advice
        advice = plan
    # Headings ("## Advice") say nothing; the sentences under them are the lesson.
    lines = [line for line in (advice or "").splitlines() if not line.lstrip().startswith("#")]
    return " ".join(" ".join(lines).split())


def lesson_of(run: RunRecord, nodes: Sequence[Node], now: float) -> MemoryEntry | None:
    """The entry of a finished run; None when it made no attempt."""
    attempts = [n for n in nodes if n.action is not Action.ROOT]
    if not attempts:
        return None
    steps: list[str] = []
    to_beat = 1.0  # eager PyTorch: a plan taught something when its attempt beat the best so far
    speedups: list[float] = []
    for node in attempts:  # creation order
        evaluation = node.evaluation
        if evaluation is None or not evaluation.passed or "eager" not in evaluation.speedups:
            continue
        speedup = evaluation.speedups["eager"]
        speedups.append(speedup)
        if speedup > to_beat:
            to_beat = speedup
            advice = _advice(node.plan)
            if advice:
                steps.append(f"{advice} ({speedup:.2f}x)")
    best = max(speedups, default=None)
    pitfalls: list[str] = []
    for node in attempts:
        evaluation = node.evaluation
        if evaluation is None or evaluation.passed:
            continue
        line = next((ln.strip() for ln in (evaluation.message or "").splitlines() if ln.strip()), "")
        text = f"{evaluation.status.value}: {line}"[:MAX_PITFALL] if line else evaluation.status.value
        if text not in pitfalls:
            pitfalls.append(text)
    return MemoryEntry(
        run_id=run.id, problem_name=run.problem.name, problem_hash=run.problem.hash,
        ops=sorted(op_signature(run.problem.source)),
        transformation=" Then: ".join(steps)[:MAX_TRANSFORMATION],
        speedup=best, pitfalls=pitfalls[:MAX_PITFALLS], created_at=now,
    )


def rank(entries: Sequence[MemoryEntry], source: str, k: int = 3, *, exclude_run: str | None = None
         ) -> list[MemoryEntry]:
    """The ``k`` entries most relevant to a problem with this reference source (overlap > 0)."""
    ops = op_signature(source)
    scored = [
        (jaccard(ops, frozenset(e.ops)), e.speedup or 0.0, e) for e in entries if e.run_id != exclude_run
    ]
    scored = [item for item in scored if item[0] > 0]
    scored.sort(key=lambda item: (-item[0], -item[1], item[2].run_id))
    return [entry for _, _, entry in scored[:k]]


def render_entries(entries: Sequence[MemoryEntry]) -> str:
    lines = []
    for entry in entries:
        gain = f"{entry.speedup:.2f}x over eager" if entry.speedup is not None else "no correct kernel"
        lines.append(f"- {entry.problem_name} (ops: {', '.join(entry.ops[:8])}; best {gain})")
        if entry.transformation:
            lines.append(f"  - worked: {entry.transformation}")
        for pitfall in entry.pitfalls:
            lines.append(f"  - pitfall: {pitfall}")
    return "\n".join(lines)
