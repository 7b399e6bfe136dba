"""What the HTML viewer shows of a run: plain JSON (finite numbers only), one object per run.

Pure. Each node carries what its detail panel shows: the plan, the source, the diff against its
parent, the evaluation (verdict, reason, trust report, timings) and the role prompts and replies
that made it. A run's system messages and prompt prefixes are identical call after call, so they
are stored once per run (``texts``) and referred to by index.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from stark_mcp.bench.metrics import baseline_mode
from stark_mcp.orchestrator.documents import RunDocument
from stark_mcp.problems.sets import problem_key
from stark_mcp.records import Evaluation, ExchangeRecord, Node
from stark_mcp.sol.text import sol_sentence
from stark_mcp.tree import Tree, leaderboard


def clean(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (JSON has no infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def run_summary(document: RunDocument) -> dict[str, Any]:
    """The run's line in the viewer's list of runs."""
    run, nodes = document.run, document.nodes
    best = _best(nodes)
    speedup = best.evaluation.speedups.get("eager") if best and best.evaluation else None
    return clean(
        {
            "id": run.id,
            "name": run.name,
            "key": problem_key(run.problem),
            "level": run.problem.level,
            "strategy": run.strategy,
            "status": run.status,
            "device": run.device,
            "budget": run.budget,
            "attempts": sum(1 for n in nodes if n.parent_id is not None),
            "best": best.id if best else None,
            "best_speedup": speedup,
        }
    )


def run_data(document: RunDocument) -> dict[str, Any]:
    run, nodes = document.run, document.nodes
    by_id = {n.id: n for n in nodes}
    texts: list[str] = []
    exchanges: dict[str | None, list[dict[str, Any]]] = {}
    for exchange in document.exchanges:
        exchanges.setdefault(exchange.node_id, []).append(_exchange(exchange, texts))
    best = _best(nodes)
    device_name = next(
        (n.evaluation.device_name for n in nodes if n.evaluation and n.evaluation.device_name), ""
    )
    return clean(
        {
            **run_summary(document),
            "policy": run.policy,
            "seed": run.seed,
            "device_name": device_name,
            "problem_source": run.problem.source,
            "language": run.language,
            "baselines": {
                name: {**stats.model_dump(mode="json"), "mode": baseline_mode(name)}
                for name, stats in run.baselines.items()
            },
            "best": best.id if best else None,
            "texts": texts,
            "nodes": [_node(n, by_id.get(n.parent_id or ""), exchanges.get(n.id, [])) for n in nodes],
            "orphans": exchanges.get(None, []),
        }
    )


def _best(nodes: list[Node]) -> Node | None:
    if not nodes:
        return None
    top = leaderboard(Tree(nodes), 1)
    return top[0] if top else None


def _node(node: Node, parent: Node | None, exchanges: list[dict[str, Any]]) -> dict[str, Any]:
    evaluation = node.evaluation
    sol = evaluation.sol if evaluation else None
    return {
        "id": node.id,
        "parent": node.parent_id,
        "seq": node.seq,
        "action": node.action.value,
        "status": evaluation.status.value if evaluation else None,
        "reason": evaluation.reason if evaluation else None,
        "speedups": {
            k: v
            for k, v in (evaluation.speedups if evaluation and evaluation.passed else {}).items()
            if math.isfinite(v)
        },
        "adherence": node.adherence,
        "sol_fraction": sol.fraction if sol else None,
        "sol_text": sol_sentence(sol, f"node {node.id}") if sol else None,
        "usage": node.usage.model_dump(mode="json"),
        "plan": node.plan,
        "source": node.source,
        "diff": _diff(parent, node) if parent is not None else None,
        "evaluation": _evaluation(evaluation) if evaluation is not None else None,
        "exchanges": exchanges,
    }


def _diff(parent: Node, node: Node) -> str:
    lines = difflib.unified_diff(
        parent.source.splitlines(),
        node.source.splitlines(),
        f"{parent.id} (parent)",
        node.id,
        lineterm="",
    )
    return "\n".join(lines)


def _evaluation(evaluation: Evaluation) -> dict[str, Any]:
    data = evaluation.model_dump(mode="json", exclude={"problem_hash", "settings_hash"})
    return data


def _exchange(exchange: ExchangeRecord, texts: list[str]) -> dict[str, Any]:
    request = exchange.request
    return {
        "id": exchange.id,
        "role": exchange.role,
        "model": exchange.model,
        "usage": exchange.usage.model_dump(mode="json"),
        "error": exchange.error,
        "system": _text_index(str(request.get("system", "")), texts),
        "prefix": _text_index(str(request.get("prefix", "")), texts),
        "body": str(request.get("body", "")),
        "reply": exchange.reply,
    }


def _text_index(text: str, texts: list[str]) -> int:
    try:
        return texts.index(text)
    except ValueError:
        texts.append(text)
        return len(texts) - 1
