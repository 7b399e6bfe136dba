"""The read side of a run: what the CLI and the MCP server show, without evaluating anything.

``RunReads`` answers from each run's tree kept in memory (``trees.RunTrees``) and from a few
indexed queries, so a read costs what it returns, not the whole tree. ``RunService`` extends
it with the calls that evaluate and record; the adapters reach the store only through these.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from stark_mcp.memory import MemoryEntry
from stark_mcp.orchestrator.errors import InvalidInput, RunError
from stark_mcp.orchestrator.export import ExportedKernel, export_kernel
from stark_mcp.orchestrator.trees import RunTrees
from stark_mcp.records import ExchangeRecord, Node, RunRecord, Usage
from stark_mcp.store import RunStats, Store
from stark_mcp.tree import Tree, leaderboard


def finite(values: dict[str, float]) -> dict[str, float]:
    """JSON has no infinity; speedups that are not finite are dropped rather than sent as strings."""
    return {k: v for k, v in values.items() if math.isfinite(v)}


class LeaderboardEntry(BaseModel):
    node_id: str
    parent_id: str | None
    action: str
    runtime_ms: float
    iqr_ms: float
    speedups: dict[str, float] = Field(default_factory=dict)
    baseline_ms: dict[str, float] = Field(
        default_factory=dict,
        description="the baseline medians these speedups were computed from (eager: timed beside the node)",
    )
    sol_fraction: float | None = Field(None, description="floor / runtime: 1.0 is the speed of light")
    sol_floor_ms: float | None = Field(None, description="the problem's floor on this machine (docs/sol.md)")
    sol_bound: str | None = Field(None, description="memory or compute: what bounds the floor")

    @classmethod
    def of(cls, node: Node) -> LeaderboardEntry:
        assert node.evaluation is not None and node.evaluation.runtime is not None
        runtime = node.evaluation.runtime
        sol = node.evaluation.sol
        return cls(
            node_id=node.id, parent_id=node.parent_id, action=node.action.value,
            runtime_ms=runtime.median_ms, iqr_ms=runtime.iqr_ms, speedups=finite(node.evaluation.speedups),
            baseline_ms={name: stats.median_ms for name, stats in node.evaluation.baselines.items()
                         if name in node.evaluation.speedups},
            sol_fraction=sol.fraction if sol else None, sol_floor_ms=sol.floor_ms if sol else None,
            sol_bound=sol.bound if sol else None,
        )


class RunSummary(BaseModel):
    """One run at a glance: for run listings (``stark-mcp runs``, ``list_runs``, ``stark://runs``)."""

    run_id: str
    name: str
    problem: str
    device: str
    policy: str
    status: str
    budget: int
    attempts: int
    passed: int
    best_node_id: str | None = None
    best_runtime_ms: float | None = None
    best_speedups: dict[str, float] = Field(default_factory=dict)
    language: str = Field("cuda", description="what candidates write kernels in: cuda, triton or cpp")
    pending_baselines: list[str] = Field(
        default_factory=list, description="baselines still being timed; their speedups come later"
    )
    created_at: float

    @classmethod
    def of(cls, run: RunRecord, stats: RunStats, best: Node | None) -> RunSummary:
        evaluation = best.evaluation if best is not None else None
        return cls(
            run_id=run.id, name=run.name, problem=run.problem.name, device=run.device,
            policy=str(run.policy.get("name", "")), status=run.status, budget=run.budget,
            attempts=stats.attempts, passed=stats.passed,
            best_node_id=best.id if best is not None else None,
            best_runtime_ms=evaluation.runtime.median_ms if evaluation and evaluation.runtime else None,
            best_speedups=finite(evaluation.speedups) if evaluation else {},
            language=run.language, pending_baselines=list(run.pending_baselines),
            created_at=run.created_at,
        )


class RunReads:
    """Runs, trees, nodes, summaries, LLM exchanges and exports, read from one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.trees = RunTrees(store)

    async def memories(self) -> list[MemoryEntry]:
        """What finished runs learned (memory across runs), oldest first."""
        return [MemoryEntry.model_validate_json(text) for text in await self.store.memory_entries()]

    async def get_run(self, run_id: str) -> RunRecord:
        return await self.store.get_run(run_id)

    async def tree(self, run_id: str) -> Tree:
        return await self.trees.get(run_id)

    async def node(self, run_id: str, node_id: str) -> Node:
        return (await self.tree(run_id)).get(node_id)

    async def attempts(self, run_id: str) -> int:
        """Attempts recorded (what the budget counts): every node but the root."""
        return len(await self.tree(run_id)) - 1

    async def attempts_left(self, run_id: str) -> int:
        run = await self.store.get_run(run_id)
        return max(0, run.budget - await self.attempts(run_id))

    async def leaderboard(self, run_id: str, k: int = 5) -> list[LeaderboardEntry]:
        if k < 1:
            raise InvalidInput(f"k must be at least 1, got {k}")
        return [LeaderboardEntry.of(node) for node in leaderboard(await self.tree(run_id), k)]

    async def best(self, run_id: str) -> Node | None:
        top = leaderboard(await self.tree(run_id), 1)
        return top[0] if top else None

    async def summaries(self) -> list[RunSummary]:
        """Every run, newest first, with its attempts, passes and best node so far."""
        found = []
        for run in await self.store.list_runs():
            stats = await self.store.run_stats(run.id)
            best = await self.store.get_node(run.id, stats.best_node_id) if stats.best_node_id else None
            found.append(RunSummary.of(run, stats, best))
        return found

    async def exchanges(self, run_id: str, node_id: str | None = None) -> list[ExchangeRecord]:
        return await self.store.exchanges(run_id, node_id)

    async def usage(self, run_id: str) -> Usage:
        """Tokens and cost of every LLM call of the run, failed expansions included."""
        total = Usage()
        for exchange in await self.store.exchanges(run_id):
            total = total + exchange.usage
        return total

    async def export(self, run_id: str, node_id: str | None = None) -> ExportedKernel:
        """A node (default: the best) as a runnable file; refused for a node that did not pass."""
        run = await self.store.get_run(run_id)
        node = await self.node(run_id, node_id) if node_id is not None else await self.best(run_id)
        if node is None:
            raise RunError(f"run {run_id} has no correct node yet; record attempts, or name a node")
        return export_kernel(run, node)
