"""The Anthropic Messages API backend (anthropic 2.x, ``AsyncAnthropic``).

The only module that imports the SDK. Retries with backoff on 408/409/429/5xx/529
and connection errors are the SDK's own (honouring ``retry-after``/``retry-after-ms``);
this module adds one more kind: an ``overloaded_error``/``api_error`` event in the
middle of a stream, which the SDK raises without retrying. Calls stream when their
max_tokens exceeds ``stream_above_tokens``: long generations stay inside the
per-attempt timeout that way, and short ones avoid the streaming overhead.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anthropic
import anyio

from stark_mcp.llm.credentials import resolve_credential
from stark_mcp.llm.errors import LLMCallFailed, LLMError
from stark_mcp.llm.pricing import PriceTable
from stark_mcp.llm.profiles import RoleProfile, default_profiles
from stark_mcp.llm.protocol import LLMReply, LLMRequest
from stark_mcp.llm.wire import build_params, parse_structured, reply_text, usage_from

log = logging.getLogger(__name__)

# Errors an SSE stream may carry after a 200; the same conditions are retried when they come as a status.
_TRANSIENT_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
_MAX_STREAM_RETRY_DELAY_S = 8.0
# Above this the SDK refuses a non-streaming call with its default timeout (about 21,333 tokens).
_SDK_NONSTREAMING_LIMIT = 21_333


class AnthropicBackend:
    """``LLMBackend`` over ``AsyncAnthropic``; one client, reused by every call."""

    name = "anthropic"

    def __init__(
        self,
        profiles: dict[str, RoleProfile] | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 4,
        prices: PriceTable | None = None,
        stream_above_tokens: int = 8192,
        stream_retry_delay_s: float = 0.5,
    ) -> None:
        if not 0 < stream_above_tokens <= _SDK_NONSTREAMING_LIMIT:
            raise LLMError(f"stream_above_tokens must be in 1..{_SDK_NONSTREAMING_LIMIT}")
        key, token = resolve_credential(api_key)
        self.profiles = profiles if profiles is not None else default_profiles()
        self.prices = prices if prices is not None else PriceTable.default()
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.stream_above_tokens = stream_above_tokens
        self.stream_retry_delay_s = stream_retry_delay_s
        self._client = anthropic.AsyncAnthropic(
            api_key=key, auth_token=token, base_url=base_url, timeout=timeout_s, max_retries=max_retries
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    async def aclose(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> AnthropicBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def profile(self, role: str) -> RoleProfile:
        try:
            return self.profiles[role]
        except KeyError:
            raise LLMError(
                f"no model profile for role {role!r}; known roles: {', '.join(sorted(self.profiles))}"
            ) from None

    async def complete(self, request: LLMRequest) -> LLMReply:
        profile = self.profile(request.role)
        params = build_params(request, profile)
        stream = params["max_tokens"] > self.stream_above_tokens
        started = time.monotonic()
        message = await self._call_with_stream_retries(params, stream=stream)
        latency = time.monotonic() - started

        text = reply_text(message.content)
        stop_reason = message.stop_reason
        structured = parse_structured(text, stop_reason) if request.json_schema is not None else None
        model = message.model or profile.model
        return LLMReply(
            text=text,
            structured=structured,
            usage=self.prices.priced(model, usage_from(message.usage)),
            model=model,
            stop_reason=stop_reason,
            latency_s=latency,
        )

    async def _call_with_stream_retries(self, params: dict[str, Any], *, stream: bool) -> Any:
        attempt = 0
        while True:
            try:
                return await self._call_once(params, stream=stream)
            except anthropic.APIStatusError as exc:
                mid_stream = stream and exc.status_code < 400 and exc.type in _TRANSIENT_STREAM_ERRORS
                if not mid_stream or attempt >= self.max_retries:
                    raise self._failure(exc) from exc
                delay = min(self.stream_retry_delay_s * 2**attempt, _MAX_STREAM_RETRY_DELAY_S)
                attempt += 1
                log.warning("%s in the middle of a stream; retry %d in %.2fs", exc.type, attempt, delay)
                await anyio.sleep(delay)
            except anthropic.APIConnectionError as exc:
                raise self._failure(exc) from exc

    async def _call_once(self, params: dict[str, Any], *, stream: bool) -> Any:
        if not stream:
            return await self._client.messages.create(**params)
        async with self._client.messages.stream(**params) as events:
            return await events.get_final_message()

    def _failure(self, exc: anthropic.APIError) -> LLMCallFailed:
        attempts = f"{self.max_retries + 1} attempts"
        if isinstance(exc, anthropic.APITimeoutError):
            return LLMCallFailed(
                f"Anthropic API call timed out after {self.timeout_s:g}s per attempt ({attempts})"
            )
        if isinstance(exc, anthropic.APIConnectionError):
            return LLMCallFailed(f"could not reach the Anthropic API at {self.base_url} ({attempts}): {exc}")
        assert isinstance(exc, anthropic.APIStatusError)
        detail = exc.api_message or str(exc)
        if isinstance(exc, anthropic.AuthenticationError):
            return LLMCallFailed(
                f"the Anthropic API rejected the key (HTTP 401: {detail}); check ANTHROPIC_API_KEY "
                "(or ANTHROPIC_AUTH_TOKEN)",
                status_code=401,
                error_type=exc.type,
            )
        if isinstance(exc, anthropic.PermissionDeniedError):
            return LLMCallFailed(
                f"the Anthropic API key lacks permission for this call (HTTP 403: {detail})",
                status_code=403,
                error_type=exc.type,
            )
        kind = f" {exc.type}" if exc.type else ""
        if exc.status_code < 400:
            what = f"Anthropic API stream failed with{kind or ' an error event'}"
        else:
            what = f"Anthropic API call failed with HTTP {exc.status_code}{kind}"
        if exc.status_code < 400 or exc.status_code in (408, 409, 429) or exc.status_code >= 500:
            what += f" (gave up after {attempts})"
        return LLMCallFailed(
            f"{what}: {detail}",
            status_code=exc.status_code,
            error_type=exc.type,
        )
