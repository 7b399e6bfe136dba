"""Pure translation between our records and the Messages API's JSON shapes.

Kept apart from the SDK call so the request shape (cache breakpoints, effort,
thinking, the temperature rule) and the reply parsing are plain functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from stark_mcp.llm.errors import LLMError, LLMOutputError
from stark_mcp.llm.profiles import MIN_THINKING_BUDGET, RoleProfile
from stark_mcp.llm.protocol import LLMRequest
from stark_mcp.records import Usage

# The only API version on which older models still take `temperature` (see profiles.py).
TEMPERATURE_API_VERSION = "2023-06-01"

_CACHED = {"type": "ephemeral"}


def build_params(request: LLMRequest, profile: RoleProfile) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create`` / ``.stream``."""
    max_tokens = request.max_tokens or profile.max_tokens
    content: list[dict[str, Any]] = []
    if request.prefix:
        content.append({"type": "text", "text": request.prefix, "cache_control": dict(_CACHED)})
    if request.body:
        content.append({"type": "text", "text": request.body})
    if not content:
        raise LLMError(f"{request.role} request has neither prefix nor body: nothing to send")

    params: dict[str, Any] = {
        "model": profile.model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": content}],
    }
    # The API rejects empty text blocks, so an empty system message is left out rather than sent.
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": dict(_CACHED)}]

    output_config: dict[str, Any] = {}
    if profile.effort is not None:
        output_config["effort"] = profile.effort
    if request.json_schema is not None:
        output_config["format"] = {"type": "json_schema", "schema": request.json_schema}
    if output_config:
        params["output_config"] = output_config

    if profile.thinking == "enabled":
        params["thinking"] = {"type": "enabled", "budget_tokens": _thinking_budget(profile, max_tokens)}
    elif profile.thinking is not None:
        params["thinking"] = {"type": profile.thinking}

    if profile.sends_temperature():
        params["extra_body"] = {"temperature": profile.temperature}
        params["extra_headers"] = {"anthropic-version": TEMPERATURE_API_VERSION}
    return params


def _thinking_budget(profile: RoleProfile, max_tokens: int) -> int:
    budget = profile.thinking_budget or max(MIN_THINKING_BUDGET, max_tokens // 2)
    if not MIN_THINKING_BUDGET <= budget < max_tokens:
        raise LLMError(
            f"thinking budget {budget} does not fit max_tokens {max_tokens} for model {profile.model}: "
            f"it must be at least {MIN_THINKING_BUDGET} and below max_tokens"
        )
    return budget


def reply_text(blocks: Iterable[Any]) -> str:
    """Concatenated text blocks; thinking and other blocks are not part of the answer."""
    return "".join(block.text for block in blocks if getattr(block, "type", None) == "text")


def usage_from(api_usage: Any) -> Usage:
    """Our ``Usage`` (one call, cost not yet priced) from the SDK's usage object."""
    return Usage(
        input_tokens=api_usage.input_tokens or 0,
        output_tokens=api_usage.output_tokens or 0,
        cache_read_tokens=getattr(api_usage, "cache_read_input_tokens", None) or 0,
        cache_write_tokens=getattr(api_usage, "cache_creation_input_tokens", None) or 0,
        calls=1,
    )


def parse_structured(text: str, stop_reason: str | None) -> dict[str, Any]:
    """The JSON object a structured-output reply holds."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (the reply hit max_tokens)" if stop_reason == "max_tokens" else ""
        raise LLMOutputError(
            f"structured reply is not valid JSON{hint}: {exc}", text=text, stop_reason=stop_reason
        ) from exc
    if not isinstance(value, dict):
        raise LLMOutputError(
            f"structured reply is JSON {type(value).__name__}, expected an object",
            text=text,
            stop_reason=stop_reason,
        )
    return value
