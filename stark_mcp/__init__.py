"""stark-mcp: STARK kernel search as an MCP server, a headless runner and a benchmark harness."""

__version__ = "0.1.0"
