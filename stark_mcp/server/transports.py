"""Serve a built server over stdio or streamable HTTP.

stdio: the SDK moves the protocol to private descriptors and points fd 1 at stderr while
serving, so stray prints cannot corrupt the stream; logs go to stderr regardless.
HTTP: bound to loopback unless told otherwise; beyond loopback a bearer token is advised.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp

from stark_mcp.server.auth import BearerTokenMiddleware

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, token: str | None) -> str | None:
    """The warning to print before binding ``host``, or None for loopback."""
    if is_loopback(host):
        return None
    warning = (
        f"serving on {host}, reachable from other machines: anyone who can connect can make this "
        "machine run code."
    )
    if token:
        return warning + " Requests must carry 'Authorization: Bearer <token>'."
    return warning + " Pass --token (or set STARK_MCP_TOKEN) to require a bearer token."


def http_app(server: MCPServer[Any], *, host: str = "127.0.0.1", token: str | None = None) -> ASGIApp:
    """The streamable-HTTP ASGI app at ``/mcp``, behind a bearer-token check when ``token`` is set."""
    app: ASGIApp = server.streamable_http_app(host=host)
    return BearerTokenMiddleware(app, token) if token else app


def serve_stdio(server: MCPServer[Any]) -> None:
    anyio.run(server.run_stdio_async)


def serve_http(server: MCPServer[Any], *, host: str, port: int, token: str | None) -> None:
    import uvicorn

    app = http_app(server, host=host, token=token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)
