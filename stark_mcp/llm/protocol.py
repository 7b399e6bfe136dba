"""The seam every model backend implements: one request in, one reply out.

A request is split the way prompt caching wants it: a static ``system`` message
and a static ``prefix`` (in-context example, the problem's architecture) that stay
identical across calls of one role, then the dynamic ``body``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from stark_mcp.records import Usage

ROLES: tuple[str, ...] = ("plan", "code", "debug", "generalist")


class LLMRequest(BaseModel):
    role: str = Field(description='"plan" | "code" | "debug" | "generalist"; selects the role profile')
    system: str = Field(description="static system message (cached)")
    prefix: str = Field("", description="static start of the user turn: example + architecture (cached)")
    body: str = Field(description="dynamic rest: latest attempt, history, role instruction")
    max_tokens: int | None = Field(None, gt=0, description="overrides the role profile's max_tokens")
    json_schema: dict[str, Any] | None = Field(
        None, description="ask for structured output; the reply's `structured` holds the parsed object"
    )


class LLMReply(BaseModel):
    text: str
    structured: dict[str, Any] | None = None
    usage: Usage
    model: str
    stop_reason: str | None = None
    latency_s: float = 0.0


@runtime_checkable
class LLMBackend(Protocol):
    name: str

    async def complete(self, request: LLMRequest) -> LLMReply: ...
