"""stark-mcp: STARK kernel search as an MCP server, a headless runner and a benchmark harness.

For the user's own program: ``stark_mcp.capture`` saves one real call of a module or function
for ``stark-mcp problem new --capture``, and ``stark_mcp.swap`` puts an exported drop-in kernel
in place of a submodule. Both import torch, so they load on first use only.
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["capture", "swap"]


def __getattr__(name: str) -> Any:
    if name == "capture":
        from stark_mcp.usercode.capture import capture

        return capture
    if name == "swap":
        from stark_mcp.usercode.swap import swap

        return swap
    raise AttributeError(f"module 'stark_mcp' has no attribute {name!r}")
