"""Where the Anthropic credential comes from, and the refusal without one.

Apart from ``anthropic.py`` so that a run without a key is refused before the SDK (about three
seconds of imports) is loaded.
"""

from __future__ import annotations

import os

from stark_mcp.llm.errors import MissingAPIKey

MISSING_KEY_MESSAGE = (
    "no Anthropic API key: set ANTHROPIC_API_KEY=sk-ant-... (or ANTHROPIC_AUTH_TOKEN) so that "
    "`stark-mcp run` can call the model itself; the MCP server (stark-mcp serve) needs no key: "
    "the host's model does the writing"
)


def resolve_credential(api_key: str | None) -> tuple[str | None, str | None]:
    """``(api_key, auth_token)`` from the argument, ``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``."""
    if api_key:
        return api_key, None
    if env_key := os.environ.get("ANTHROPIC_API_KEY"):
        return env_key, None
    if env_token := os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        return None, env_token
    raise MissingAPIKey(MISSING_KEY_MESSAGE)
