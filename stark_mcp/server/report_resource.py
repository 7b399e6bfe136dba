"""The MCP resource ``stark://runs/{run_id}/report.html``: a run's tree viewer as one HTML file.

The same self-contained page ``stark-mcp report RUN_ID`` writes (no network, nothing to install),
so a host or IDE can save it and open it in a browser.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from stark_mcp.report.writer import run_report_html
from stark_mcp.server.errors import resource_errors
from stark_mcp.server.state import app_state

REPORT_URI = "stark://runs/{run_id}/report.html"


async def run_report(run_id: str, ctx: Context) -> str:
    """The run's search tree as a self-contained HTML page: click a node for its plan, source,
    diff against its parent, evaluation and the agents' prompts and replies."""
    with resource_errors():
        return await run_report_html(app_state(ctx).service, run_id)


def register_report_resource(server: MCPServer[Any]) -> None:
    server.resource(REPORT_URI, name="run_report", title="A run's report (HTML)", mime_type="text/html")(
        run_report
    )
