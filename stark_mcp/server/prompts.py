"""MCP prompts ``plan``, ``code`` and ``debug``: the same text ``build_context`` returns.

For hosts that surface prompts as commands: the user picks one, fills in the run and
node, and the host's model receives the role's full prompt as one user message.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage

from stark_mcp.server.errors import prompt_errors
from stark_mcp.server.state import app_state


async def render_role(
    ctx: Context, run_id: str, node_id: str, role: str, plan: str | None = None
) -> list[UserMessage]:
    with prompt_errors():
        prompt = await app_state(ctx).service.build_context(run_id, node_id, role, plan)
    return [UserMessage(prompt.text)]


async def plan(run_id: str, node_id: str, ctx: Context) -> list[UserMessage]:
    """Plan one optimization of a node: advice plus the node's source with IMPROVE anchors."""
    return await render_role(ctx, run_id, node_id, "plan")


async def code(run_id: str, node_id: str, plan: str, ctx: Context) -> list[UserMessage]:
    """Write the code that realizes a plan (its anchored scaffold is validated) as class ModelNew."""
    return await render_role(ctx, run_id, node_id, "code", plan)


async def debug(run_id: str, node_id: str, ctx: Context) -> list[UserMessage]:
    """Repair a failing node, given its error and its siblings' attempts."""
    return await render_role(ctx, run_id, node_id, "debug")


def register_prompts(server: MCPServer[Any]) -> None:
    server.prompt(title="STARK plan agent")(plan)
    server.prompt(title="STARK code agent")(code)
    server.prompt(title="STARK debug agent")(debug)
