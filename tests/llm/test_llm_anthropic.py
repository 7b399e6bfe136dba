"""The real AnthropicBackend and SDK against the local fake server (no network)."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

import pytest
from llm_fake_api import Fail, FakeAnthropic, Reply, Stall, StreamError, text_reply

from stark_mcp.llm import (
    LLMCallFailed,
    LLMError,
    LLMOutputError,
    LLMRequest,
    MissingAPIKey,
    ModelPrice,
    PriceTable,
    RoleProfile,
    default_profiles,
)

if TYPE_CHECKING:
    from stark_mcp.llm.anthropic import AnthropicBackend

# Importing the SDK costs about 4 CPU-s: this module's tests (and the two other tests that build the
# real backend, tests/llm/test_llm_scripted.py and tests/test_config.py) share one worker, and the
# import is made when a test first needs it, not by every worker's collection.
pytestmark = pytest.mark.xdist_group("anthropic_sdk")

KEY = "sk-ant-test-key"


def anthropic_backend(*args: Any, **kwargs: Any) -> AnthropicBackend:
    from stark_mcp.llm.anthropic import AnthropicBackend

    return AnthropicBackend(*args, **kwargs)


def make_backend(
    fake: FakeAnthropic, profiles: dict[str, RoleProfile] | None = None, **kwargs
) -> AnthropicBackend:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("max_retries", 2)
    return anthropic_backend(
        profiles or default_profiles("claude-sonnet-4-6"), base_url=fake.base_url, **kwargs
    )


def request(role: str = "plan", **kwargs) -> LLMRequest:
    fields = {"system": "You are the planner.", "prefix": "EXAMPLE + ARCHITECTURE", "body": "latest attempt"}
    fields.update(kwargs)
    return LLMRequest(role=role, **fields)


def one_profile(**kwargs) -> dict[str, RoleProfile]:
    kwargs.setdefault("model", "claude-sonnet-4-6")
    return {"plan": RoleProfile(**kwargs)}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("role", "max_tokens", "effort"),
    [
        ("plan", 16000, "high"),
        ("code", 32000, "medium"),
        ("debug", 32000, "medium"),
        ("generalist", 32000, "high"),
    ],
)
async def test_request_shape_per_role(fake: FakeAnthropic, role: str, max_tokens: int, effort: str) -> None:
    fake.queue(text_reply("fine"))
    async with make_backend(fake) as backend:
        reply = await backend.complete(request(role))
    assert reply.text == "fine"
    [seen] = fake.requests
    body = seen.body
    assert body["model"] == "claude-sonnet-4-6"
    assert body["max_tokens"] == max_tokens
    assert body["output_config"] == {"effort": effort}
    assert body["thinking"] == {"type": "adaptive"}
    assert "temperature" not in body and "top_p" not in body
    assert body["stream"] is True  # above stream_above_tokens
    assert body["system"] == [
        {"type": "text", "text": "You are the planner.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "EXAMPLE + ARCHITECTURE", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "latest attempt"},
            ],
        }
    ]
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in seen.headers
    assert seen.headers["anthropic-version"] == "2026-10-21"


@pytest.mark.anyio
async def test_short_call_is_not_streamed_and_skips_thinking_blocks(fake: FakeAnthropic) -> None:
    fake.queue(
        Reply(
            content=[
                {"type": "thinking", "thinking": "let me think", "signature": "s"},
                {"type": "text", "text": "part one, "},
                {"type": "text", "text": "part two"},
            ],
            stop_reason="end_turn",
        )
    )
    async with make_backend(fake, one_profile(max_tokens=1000, effort="low")) as backend:
        reply = await backend.complete(request(prefix="", system=""))
    assert reply.text == "part one, part two"
    assert reply.stop_reason == "end_turn"
    body = fake.requests[0].body
    assert "stream" not in body or body["stream"] is False
    assert "system" not in body and "thinking" not in body
    assert body["messages"][0]["content"] == [{"type": "text", "text": "latest attempt"}]


@pytest.mark.anyio
async def test_streamed_reply_is_accumulated(fake: FakeAnthropic) -> None:
    fake.queue(
        Reply(
            content=[
                {"type": "thinking", "thinking": "plan the tiling"},
                {"type": "text", "text": "```python\nclass ModelNew: ...\n```"},
            ],
            input_tokens=321,
            output_tokens=77,
            cache_read=1000,
            cache_write=20,
            stop_reason="max_tokens",
        )
    )
    async with make_backend(fake, one_profile(max_tokens=30000), stream_above_tokens=8192) as backend:
        reply = await backend.complete(request())
    assert fake.requests[0].body["stream"] is True
    assert reply.text == "```python\nclass ModelNew: ...\n```"
    assert reply.stop_reason == "max_tokens"
    usage = reply.usage
    assert (usage.input_tokens, usage.output_tokens) == (321, 77)  # output from message_delta
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.calls) == (1000, 20, 1)
    assert reply.latency_s > 0


@pytest.mark.anyio
async def test_usage_and_cost_from_a_custom_price_table(fake: FakeAnthropic) -> None:
    prices = PriceTable(
        models={"m-test": ModelPrice(input=2.0, output=10.0, cache_read=0.5, cache_write=4.0)}
    )
    fake.queue(
        text_reply("a", input_tokens=1000, output_tokens=200, cache_read=5000, cache_write=3000),
        text_reply(
            "b",
            input_tokens=1000,
            output_tokens=200,
            cache_read=5000,
            cache_write=3000,
            model="m-test-20260101",
        ),
    )
    async with make_backend(fake, one_profile(model="m-test", max_tokens=500), prices=prices) as backend:
        first = await backend.complete(request())
        dated = await backend.complete(request())
    expected = (1000 * 2.0 + 200 * 10.0 + 5000 * 0.5 + 3000 * 4.0) / 1e6
    assert first.model == "m-test"
    assert first.usage.cost_usd == pytest.approx(expected)
    assert dated.model == "m-test-20260101"
    assert dated.usage.cost_usd == pytest.approx(expected)  # a dated snapshot is priced as its family
    assert (first.usage + dated.usage).cost_usd == pytest.approx(2 * expected)


@pytest.mark.anyio
async def test_unpriced_model_costs_nothing(fake: FakeAnthropic) -> None:
    fake.queue(text_reply("x", input_tokens=10**6))
    async with make_backend(fake, one_profile(model="claude-unknown-9", max_tokens=500)) as backend:
        reply = await backend.complete(request())
    assert reply.usage.input_tokens == 10**6 and reply.usage.cost_usd == 0.0


@pytest.mark.anyio
async def test_temperature_sent_only_where_accepted(fake: FakeAnthropic) -> None:
    profiles = {
        "plan": RoleProfile(model="claude-haiku-4-5", max_tokens=800, temperature=0.8),
        "code": RoleProfile(model="claude-opus-4-7", max_tokens=800, temperature=0.1),
        "debug": RoleProfile(model="claude-haiku-4-5", max_tokens=800, temperature=0.1, thinking="adaptive"),
    }
    fake.queue(text_reply("a"), text_reply("b"), text_reply("c"))
    async with make_backend(fake, profiles) as backend:
        for role in ("plan", "code", "debug"):
            await backend.complete(request(role))
    accepted, newer_model, thinking = fake.requests
    assert accepted.body["temperature"] == 0.8
    assert accepted.headers["anthropic-version"] == "2023-06-01"
    assert "temperature" not in newer_model.body
    assert newer_model.headers["anthropic-version"] == "2026-10-21"
    assert "temperature" not in thinking.body  # the API fixes temperature while thinking


@pytest.mark.anyio
async def test_enabled_thinking_sends_a_budget(fake: FakeAnthropic) -> None:
    fake.queue(text_reply("a"), text_reply("b"))
    profiles = {
        "plan": RoleProfile(
            model="claude-opus-4-5", max_tokens=4000, thinking="enabled", thinking_budget=2048
        ),
        "code": RoleProfile(model="claude-opus-4-5", max_tokens=4000, thinking="enabled"),
    }
    async with make_backend(fake, profiles) as backend:
        await backend.complete(request("plan"))
        await backend.complete(request("code"))
        with pytest.raises(LLMError, match="thinking budget"):
            await backend.complete(request("plan", max_tokens=2000))
    assert fake.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert fake.requests[1].body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert len(fake.requests) == 2


@pytest.mark.anyio
async def test_request_max_tokens_overrides_profile(fake: FakeAnthropic) -> None:
    fake.queue(text_reply("a"))
    async with make_backend(fake) as backend:
        await backend.complete(request("code", max_tokens=1234))
    body = fake.requests[0].body
    assert body["max_tokens"] == 1234 and "stream" not in body


@pytest.mark.anyio
async def test_structured_output(fake: FakeAnthropic) -> None:
    schema = {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "string"}}}}
    fake.queue(
        text_reply('{"steps": ["tile", "fuse"]}'), text_reply('{"steps": ["ti', stop_reason="max_tokens")
    )
    async with make_backend(fake, one_profile(max_tokens=2000, effort="high")) as backend:
        reply = await backend.complete(request(json_schema=schema))
        with pytest.raises(LLMOutputError, match="max_tokens") as excinfo:
            await backend.complete(request(json_schema=schema))
    assert reply.structured == {"steps": ["tile", "fuse"]}
    assert fake.requests[0].body["output_config"] == {
        "effort": "high",
        "format": {"type": "json_schema", "schema": schema},
    }
    assert excinfo.value.text == '{"steps": ["ti'


@pytest.mark.anyio
async def test_retries_two_overloaded_then_success(fake: FakeAnthropic) -> None:
    overloaded = Fail(529, "overloaded_error", "Overloaded", {"retry-after-ms": "1"})
    fake.queue(overloaded, overloaded, text_reply("made it"))
    async with make_backend(fake, max_retries=4) as backend:
        reply = await backend.complete(request())
    assert reply.text == "made it"
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1", "2"]


@pytest.mark.anyio
async def test_rate_limit_with_retry_after_is_retried(fake: FakeAnthropic) -> None:
    fake.queue(Fail(429, "rate_limit_error", "slow down", {"retry-after": "0.01"}), text_reply("ok"))
    async with make_backend(fake, one_profile(max_tokens=500)) as backend:
        reply = await backend.complete(request())
    assert reply.text == "ok" and len(fake.requests) == 2


@pytest.mark.anyio
async def test_persistent_server_error_gives_up_after_max_retries(fake: FakeAnthropic) -> None:
    fake.queue(*[Fail(500, "api_error", "boom", {"retry-after-ms": "1"}) for _ in range(5)])
    async with make_backend(fake, max_retries=2) as backend:
        with pytest.raises(LLMCallFailed) as excinfo:
            await backend.complete(request())
    assert len(fake.requests) == 3
    assert excinfo.value.status_code == 500 and excinfo.value.error_type == "api_error"
    assert (
        "HTTP 500" in str(excinfo.value)
        and "3 attempts" in str(excinfo.value)
        and "boom" in str(excinfo.value)
    )


@pytest.mark.anyio
async def test_bad_request_is_not_retried(fake: FakeAnthropic) -> None:
    fake.queue(Fail(400, "invalid_request_error", "model: unknown id"), text_reply("never"))
    async with make_backend(fake) as backend:
        with pytest.raises(
            LLMCallFailed, match="HTTP 400 invalid_request_error: model: unknown id"
        ) as excinfo:
            await backend.complete(request())
    assert excinfo.value.status_code == 400 and len(fake.requests) == 1


@pytest.mark.anyio
async def test_rejected_key_is_a_clear_error(fake: FakeAnthropic) -> None:
    fake.queue(Fail(401, "authentication_error", "invalid x-api-key"))
    async with make_backend(fake, api_key="sk-ant-wrong") as backend:
        with pytest.raises(LLMCallFailed, match="rejected the key") as excinfo:
            await backend.complete(request())
    assert excinfo.value.status_code == 401
    assert "ANTHROPIC_API_KEY" in str(excinfo.value)
    assert len(fake.requests) == 1
    assert fake.requests[0].headers["authorization"] == "Bearer sk-ant-wrong"


@pytest.mark.anyio
async def test_error_event_mid_stream_is_retried(fake: FakeAnthropic) -> None:
    fake.queue(StreamError("overloaded_error"), text_reply("second try"))
    async with make_backend(fake, stream_retry_delay_s=0.001) as backend:
        reply = await backend.complete(request())
    assert reply.text == "second try" and len(fake.requests) == 2


@pytest.mark.anyio
async def test_persistent_mid_stream_errors_fail(fake: FakeAnthropic) -> None:
    fake.queue(StreamError(), StreamError(), StreamError())
    async with make_backend(fake, max_retries=1, stream_retry_delay_s=0.001) as backend:
        with pytest.raises(LLMCallFailed, match="stream failed with overloaded_error") as excinfo:
            await backend.complete(request())
    assert excinfo.value.error_type == "overloaded_error"
    assert len(fake.requests) == 2


@pytest.mark.anyio
async def test_per_call_timeout(fake: FakeAnthropic) -> None:
    fake.queue(Stall(1.5))
    async with make_backend(fake, one_profile(max_tokens=500), timeout_s=0.3, max_retries=0) as backend:
        with pytest.raises(LLMCallFailed, match="timed out after 0.3s") as excinfo:
            await backend.complete(request())
    assert excinfo.value.status_code is None


@pytest.mark.anyio
async def test_unreachable_endpoint() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = anthropic_backend(
        one_profile(max_tokens=500), api_key=KEY, base_url=f"http://127.0.0.1:{port}", max_retries=0
    )
    async with backend:
        with pytest.raises(LLMCallFailed, match="could not reach the Anthropic API at http://127.0.0.1"):
            await backend.complete(request())


@pytest.mark.anyio
async def test_unknown_role(fake: FakeAnthropic) -> None:
    async with make_backend(fake) as backend:
        with pytest.raises(LLMError, match="no model profile for role 'critic'"):
            await backend.complete(request("critic"))
    assert fake.requests == []


def test_missing_key_says_how_to_set_one() -> None:
    with pytest.raises(MissingAPIKey) as excinfo:
        anthropic_backend()
    message = str(excinfo.value)
    assert "ANTHROPIC_API_KEY=" in message
    assert "stark-mcp serve" in message and "needs no key" in message


@pytest.mark.anyio
@pytest.mark.parametrize("variable", ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"])
async def test_key_from_environment(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    fake.queue(text_reply("ok"))
    async with anthropic_backend(one_profile(max_tokens=500)) as backend:
        assert backend.base_url.rstrip("/") == fake.base_url
        await backend.complete(request())
    assert fake.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_stream_threshold_must_be_one_the_sdk_allows() -> None:
    with pytest.raises(LLMError, match="stream_above_tokens"):
        anthropic_backend(api_key=KEY, stream_above_tokens=50_000)
