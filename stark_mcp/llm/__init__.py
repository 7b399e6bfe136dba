"""Model backends behind one small protocol (see ``docs/llm.md``).

``AnthropicBackend`` is loaded on first use so that importing this package does
not import the anthropic SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stark_mcp.llm.errors import LLMCallFailed, LLMError, LLMOutputError, MissingAPIKey
from stark_mcp.llm.factory import backend_from_settings
from stark_mcp.llm.pricing import DEFAULT_PRICES, ModelPrice, PriceTable
from stark_mcp.llm.profiles import (
    DEFAULT_MODEL,
    RoleProfile,
    default_profiles,
    model_accepts_temperature,
)
from stark_mcp.llm.protocol import ROLES, LLMBackend, LLMReply, LLMRequest
from stark_mcp.llm.scripted import ScriptedBackend, load_scripted_replies

if TYPE_CHECKING:
    from stark_mcp.llm.anthropic import AnthropicBackend

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_PRICES",
    "ROLES",
    "AnthropicBackend",
    "LLMBackend",
    "LLMCallFailed",
    "LLMError",
    "LLMOutputError",
    "LLMReply",
    "LLMRequest",
    "MissingAPIKey",
    "ModelPrice",
    "PriceTable",
    "RoleProfile",
    "ScriptedBackend",
    "backend_from_settings",
    "default_profiles",
    "load_scripted_replies",
    "model_accepts_temperature",
]


def __getattr__(name: str) -> Any:
    if name == "AnthropicBackend":
        from stark_mcp.llm.anthropic import AnthropicBackend

        return AnthropicBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
