"""The ``profile_kernel`` tool: a node's per-kernel profile, taken now and kept with its evaluation.

A module-level tool that ``register_profile_tools`` attaches, a thin wrapper over
``RunService.profile_node``.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from stark_mcp.agents.profiles import describe, render_profile_table
from stark_mcp.records import ProfileReport
from stark_mcp.server.errors import tool_errors
from stark_mcp.server.progress_relay import relay
from stark_mcp.server.state import app_state
from stark_mcp.server.tools import EVALUATES, NodeId, RunId


class KernelProfileResult(BaseModel):
    run_id: str
    node_id: str
    source: str = Field(description="ncu (counters), torch_profiler (times and launches only) or none")
    summary: str = Field(description="what measured the profile, and why not more")
    table: str = Field(description="the slowest kernels, as the planner sees them (markdown)")
    profile: ProfileReport
    next: str


async def profile_kernel(run_id: RunId, node_id: NodeId, ctx: Context) -> KernelProfileResult:
    """Profile one node's kernels now on the run's GPU and keep the profile with its evaluation:
    per kernel its share of device time, launch (grid, block, registers, shared memory), achieved
    occupancy, DRAM and SM throughput as % of peak, L1/L2 hit rates, top warp stall reasons and its
    roofline position. Uses Nsight Compute where it can read counters, else the torch profiler's
    kernel list. Takes 10-30 s; never changes the node's verdict or runtime. Passing GPU attempts
    are profiled automatically, so call this for the root (n0) or to refresh a profile."""
    with tool_errors():
        report = await app_state(ctx).service.profile_node(run_id, node_id, progress=relay(ctx))
    return KernelProfileResult(
        run_id=run_id,
        node_id=node_id,
        source=report.source,
        summary=describe(report),
        table=render_profile_table([(node_id, report)]),
        profile=report,
        next=f"build_context(run_id={run_id!r}, node_id={node_id!r}, role='plan') shows this table "
        "to the planner.",
    )


def register_profile_tools(server: MCPServer[Any]) -> None:
    server.tool(title="Profile a node's kernels", annotations=EVALUATES)(profile_kernel)
