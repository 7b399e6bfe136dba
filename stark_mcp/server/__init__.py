"""The MCP server (the only package that imports ``mcp``): tools, prompts and resources over RunService."""

from stark_mcp.server.app import build_server

__all__ = ["build_server"]
