"""Read-only MCP resources over RunService: runs, a run's tree, node sources and logs, the best kernel.

URIs:
  stark://runs                                        JSON list of run summaries, newest first
  stark://runs/{run_id}/tree                          JSON: the run and its nodes
  stark://runs/{run_id}/nodes/{node_id}/source        the node's source (text/x-python)
  stark://runs/{run_id}/nodes/{node_id}/logs          the evaluator's message and logs (text/plain)
  stark://runs/{run_id}/best                          the exported runnable best kernel (text/x-python)
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from stark_mcp.orchestrator.reads import RunReads, finite
from stark_mcp.records import Node, RunRecord
from stark_mcp.server.errors import resource_errors
from stark_mcp.server.state import SharedState, app_state

# Compact separators: the tree document grows with the run.
COMPACT = (",", ":")


def node_row(node: Node) -> dict[str, Any]:
    evaluation = node.evaluation
    # Action and Status are str enums: JSON writes their values without a .value lookup per node.
    return {
        "id": node.id,
        "parent": node.parent_id,
        "action": node.action,
        "status": evaluation.status if evaluation else None,
        "reason": evaluation.reason if evaluation else None,
        "runtime_ms": evaluation.runtime.median_ms if evaluation and evaluation.runtime else None,
        "speedups": finite(evaluation.speedups) if evaluation else {},
        "adherence": node.adherence,
    }


def tree_document(run: RunRecord, rows: list[str]) -> str:
    """The run and its nodes as compact JSON; ``rows`` are the nodes' rows, already JSON."""
    head = json.dumps({
        "run_id": run.id,
        "name": run.name,
        "problem": run.problem.name,
        "device": run.device,
        "budget": run.budget,
        "baselines_ms": {k: v.median_ms for k, v in run.baselines.items()},
    }, separators=COMPACT)
    return head[:-1] + ',"nodes":[' + ",".join(rows) + "]}"


class TreeRows:
    """Each run's node rows, rendered once: nodes never change and only ever come after the last
    one, so a tree read after a new attempt renders that attempt's row, not the whole tree's."""

    def __init__(self) -> None:
        self._rows: dict[str, list[str]] = {}

    def rows(self, run_id: str, nodes: Sequence[Node]) -> list[str]:
        rows = self._rows.setdefault(run_id, [])
        if len(rows) > len(nodes):
            rows.clear()  # not a later version of what was rendered: start again
        rows.extend(json.dumps(node_row(node), separators=COMPACT) for node in nodes[len(rows):])
        return rows


def logs_text(node: Node) -> str:
    evaluation = node.evaluation
    if evaluation is None:
        return f"node {node.id} has no evaluation\n"
    parts = [f"status: {evaluation.status.value}" + (f" ({evaluation.reason})" if evaluation.reason else "")]
    if evaluation.message:
        parts.append(f"message: {evaluation.message}")
    for phase, text in evaluation.logs.items():
        parts.append(f"--- {phase} ---\n{text.rstrip()}")
    if not evaluation.logs:
        parts.append("(no logs kept)")
    return "\n".join(parts) + "\n"


async def run_list(reads: RunReads) -> str:
    """Every run with its attempts, passes and best node so far, newest first."""
    with resource_errors():
        summaries = await reads.summaries()
    return json.dumps([s.model_dump(mode="json") for s in summaries], indent=2)


async def run_tree(run_id: str, ctx: Context) -> str:
    """The run's nodes: id, parent, action, status, reason, runtime, speedups, adherence."""
    service = app_state(ctx).service
    with resource_errors():
        nodes = list(await service.tree(run_id))
        run = await service.get_run(run_id)
    rendered = _ROWS.get(service)
    if rendered is None:
        rendered = _ROWS[service] = TreeRows()
    return tree_document(run, rendered.rows(run_id, nodes))


# One set of rendered rows per service (per database), alive as long as the service is.
_ROWS: weakref.WeakKeyDictionary[Any, TreeRows] = weakref.WeakKeyDictionary()


async def node_source(run_id: str, node_id: str, ctx: Context) -> str:
    """The node's full Python source (the reference module for the root)."""
    with resource_errors():
        return (await app_state(ctx).service.node(run_id, node_id)).source


async def node_logs(run_id: str, node_id: str, ctx: Context) -> str:
    """The evaluator's verdict, message and trimmed logs for the node."""
    with resource_errors():
        return logs_text(await app_state(ctx).service.node(run_id, node_id))


async def best_kernel(run_id: str, ctx: Context) -> str:
    """The fastest correct node as a runnable file with a self-check against the reference."""
    with resource_errors():
        return (await app_state(ctx).service.export(run_id)).source


def register_resources(server: MCPServer[Any], shared: SharedState) -> None:
    # The SDK gives static resources no Context, so this one finds the state through ``shared``.
    async def runs() -> str:
        """Every run with its attempts, passes and best node so far, newest first."""
        return await run_list(shared.current().service)

    server.resource("stark://runs", name="runs", title="Runs", mime_type="application/json")(runs)
    server.resource(
        "stark://runs/{run_id}/tree", name="run_tree", title="A run's tree", mime_type="application/json"
    )(run_tree)
    server.resource(
        "stark://runs/{run_id}/nodes/{node_id}/source", name="node_source", title="A node's source",
        mime_type="text/x-python",
    )(node_source)
    server.resource(
        "stark://runs/{run_id}/nodes/{node_id}/logs", name="node_logs", title="A node's evaluation logs",
        mime_type="text/plain",
    )(node_logs)
    server.resource(
        "stark://runs/{run_id}/best", name="best_kernel", title="A run's best kernel",
        mime_type="text/x-python",
    )(best_kernel)
