"""Plain-text views of a recorded run: the tree, the leaderboard, one node, its LLM exchanges.

Pure functions over store records, for ``stark-mcp show`` and anyone else who wants to read a
run without a database client.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from stark_mcp.agents.profiles import render_profile_table
from stark_mcp.records import ExchangeRecord, Node, RunRecord
from stark_mcp.sol.text import fraction_text, sol_sentence
from stark_mcp.tree import Tree, leaderboard

_LABEL_WIDTH = 34


def verdict(node: Node) -> str:
    if node.evaluation is None:
        return "not evaluated"
    evaluation = node.evaluation
    return evaluation.status.value + (f" ({evaluation.reason})" if evaluation.reason else "")


def speedup_text(node: Node, baseline: str = "eager") -> str:
    if node.evaluation is None or not node.evaluation.passed:
        return ""
    value = node.evaluation.speedups.get(baseline)
    return f"{value:.2f}x" if value is not None and math.isfinite(value) else ""


def baseline_text(node: Node, baseline: str = "eager") -> str:
    """The baseline time the node's speedup over ``baseline`` was computed from: for eager, the one
    re-timed side by side with the node (not the run's, timed when it was created)."""
    evaluation = node.evaluation
    if evaluation is None or not evaluation.passed or baseline not in evaluation.baselines:
        return ""
    return f"{evaluation.baselines[baseline].median_ms:.4g} ms"


def runtime_text(node: Node) -> str:
    evaluation = node.evaluation
    if evaluation is None or not evaluation.passed or evaluation.runtime is None:
        return ""
    return f"{evaluation.runtime.median_ms:.4g} ms"


def render_header(run: RunRecord) -> str:
    eager = run.baselines.get("eager")
    baselines = ", ".join(f"{name} {stats.median_ms:.4g} ms" for name, stats in run.baselines.items())
    pending = f"; still timing {', '.join(run.pending_baselines)}" if run.pending_baselines else ""
    return (
        f"run {run.id} ({run.name}) on {run.device} in {run.language}: strategy {run.strategy}, policy "
        f"{run.policy.get('name')}, budget {run.budget}, seed {run.seed}, status {run.status}\n"
        f"baselines: {baselines or 'none'}" + ("" if eager else " (no eager baseline)") + pending
        + ("\neach speedup is over the baseline timed beside that attempt (the eager column), not these"
           if eager else "")
    )


def render_tree(run: RunRecord, nodes: Sequence[Node]) -> str:
    """The run's header, then one line per node, indented under its parent, in creation order."""
    lines = [render_header(run), ""]
    lines.append(
        f"{'node':<{_LABEL_WIDTH}} {'verdict':<28} {'runtime':>11} {'eager':>11} {'vs eager':>9} "
        f"{'adherence':>9} {'SOL':>5}"
    )
    if not nodes:
        return "\n".join(lines + ["(no nodes)"])
    tree = Tree(list(nodes))

    def walk(node: Node, prefix: str, branch: str) -> None:
        label = f"{prefix}{branch}{node.id} {node.action.value}"
        adherence = f"{node.adherence:.2f}" if node.adherence is not None else ""
        evaluation = node.evaluation
        sol = fraction_text(evaluation.sol) if evaluation and evaluation.passed and evaluation.sol else ""
        lines.append(
            f"{label:<{_LABEL_WIDTH}} {verdict(node):<28} {runtime_text(node):>11} "
            f"{baseline_text(node):>11} {speedup_text(node):>9} {adherence:>9} {sol:>5}".rstrip()
        )
        children = tree.children(node.id)
        inner = prefix + ("" if not branch else ("    " if branch == "└── " else "│   "))
        for i, child in enumerate(children):
            walk(child, inner, "└── " if i == len(children) - 1 else "├── ")

    walk(tree.root, "", "")
    return "\n".join(lines)


def render_leaderboard(nodes: Sequence[Node], k: int = 5) -> str:
    if not nodes:
        return "leaderboard: empty"
    top = leaderboard(Tree(list(nodes)), k)
    if not top:
        return "leaderboard: no correct attempt yet"
    lines = ["leaderboard (fastest distinct correct attempts):"]
    for rank, node in enumerate(top, start=1):
        speedups = ", ".join(
            f"{name} {value:.2f}x" + (f" (over {over})" if (over := baseline_text(node, name)) else "")
            for name, value in sorted(node.evaluation.speedups.items())  # type: ignore[union-attr]
            if math.isfinite(value)
        )
        sol = node.evaluation.sol  # type: ignore[union-attr]
        at = f"  {fraction_text(sol)} of SOL" if sol is not None and sol.fraction is not None else ""
        lines.append(f"{rank:>3}. {node.id:<6} {runtime_text(node):>11}{at}  {speedups}")
    best = top[0].evaluation.sol  # type: ignore[union-attr]
    if best is not None and best.fraction is not None:
        lines.append("speed of light: " + sol_sentence(best, f"the best attempt ({top[0].id})"))
    return "\n".join(lines)


def render_node(node: Node) -> str:
    """One node in full: what made it, its plan, its source and what the evaluator said."""
    evaluation = node.evaluation
    parts = [
        f"node {node.id} ({node.action.value}" + (f" of {node.parent_id}" if node.parent_id else "") + ")",
        f"verdict: {verdict(node)}" + (f"; {runtime_text(node)}" if runtime_text(node) else "")
        + (f"; {speedup_text(node)} vs eager" if speedup_text(node) else "")
        + (f" (eager {baseline_text(node)}, timed beside it)" if speedup_text(node) and baseline_text(node)
           else ""),
        f"LLM usage: {node.usage.calls} call(s), "
        f"{node.usage.input_tokens + node.usage.output_tokens} tokens, ${node.usage.cost_usd:.4f}",
    ]
    if node.adherence is not None:
        parts.append(f"adherence to the plan's spans: {node.adherence:.2f}")
    if evaluation is not None and evaluation.message:
        parts.append(f"message: {evaluation.message}")
    if evaluation is not None and evaluation.flags:
        parts.append("flags: " + ", ".join(evaluation.flags))
    if evaluation is not None and evaluation.sol is not None:
        parts.append("speed of light: " + sol_sentence(evaluation.sol, f"node {node.id}"))
    if node.plan:
        parts.append("--- plan ---\n" + node.plan.rstrip())
    parts.append("--- source ---\n" + node.source.rstrip())
    if evaluation is not None and not evaluation.passed:
        for phase, text in evaluation.logs.items():
            if text:
                parts.append(f"--- {phase} log ---\n{text.rstrip()}")
    return "\n".join(parts)


def render_exchanges(exchanges: Sequence[ExchangeRecord], *, full: bool = False) -> str:
    """Stored prompts and replies; ``full`` adds each request's system message and static prefix."""
    if not exchanges:
        return "no exchanges recorded"
    blocks: list[str] = []
    for exchange in exchanges:
        owner = exchange.node_id or "no node (the expansion produced no attempt)"
        usage = exchange.usage
        head = (
            f"=== exchange {exchange.id}: {exchange.role} agent, {exchange.model}, {owner}; "
            f"{usage.input_tokens} in / {usage.output_tokens} out tokens, ${usage.cost_usd:.4f}"
        )
        parts = [head]
        if exchange.error:
            parts.append(f"rejected: {exchange.error}")
        request = exchange.request
        if full:
            parts.append("--- system ---\n" + str(request.get("system", "")).rstrip())
            parts.append("--- prefix ---\n" + str(request.get("prefix", "")).rstrip())
        parts.append("--- prompt ---\n" + str(request.get("body", "")).rstrip())
        parts.append("--- reply ---\n" + (exchange.reply.rstrip() or "(none)"))
        blocks.append("\n".join(parts))
    return "\n\n".join(blocks)


def render_profiles(nodes: Sequence[Node], per_node: int = 8) -> str:
    """The profiled nodes' slowest kernels, one table (what the planner sees, with more rows)."""
    profiled = [
        (n.id, n.evaluation.profile)
        for n in nodes
        if n.evaluation is not None and n.evaluation.profile is not None
    ]
    table = render_profile_table(profiled, per_node=per_node)  # type: ignore[arg-type]
    if table:
        skipped = [f"{node_id}: {p.reason or 'no kernels'}" for node_id, p in profiled if not p.kernels]
        return table + ("\n\nprofiles without kernels: " + "; ".join(skipped) if skipped else "")
    reasons = "; ".join(f"{node_id}: {p.reason}" for node_id, p in profiled if p.reason)
    return (
        "no profiles with kernels"
        + (f" ({reasons})" if reasons else "")
        + ": passing GPU attempts are profiled when they are evaluated; profile_kernel over MCP adds one"
    )
