"""ScriptedBackend, scripted reply files and the backend factory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_fake_api import FakeAnthropic, text_reply

from stark_mcp.config import Settings
from stark_mcp.llm import (
    LLMBackend,
    LLMCallFailed,
    LLMError,
    LLMOutputError,
    LLMReply,
    LLMRequest,
    MissingAPIKey,
    ModelPrice,
    PriceTable,
    ScriptedBackend,
    backend_from_settings,
    load_scripted_replies,
)
from stark_mcp.records import Usage


def req(role: str, body: str = "b" * 40, **kwargs) -> LLMRequest:
    return LLMRequest(role=role, system="s" * 40, prefix="p" * 20, body=body, **kwargs)


@pytest.mark.anyio
async def test_replays_in_order_and_records_requests() -> None:
    backend = ScriptedBackend(["first", "second"])
    assert isinstance(backend, LLMBackend)
    one = await backend.complete(req("plan"))
    two = await backend.complete(req("code", body="other"))
    assert (one.text, two.text) == ("first", "second")
    assert [r.role for r in backend.requests] == ["plan", "code"]
    assert backend.requests[1].body == "other"
    assert backend.pending == 0
    with pytest.raises(LLMError, match="no reply queued for role debug"):
        await backend.complete(req("debug"))


@pytest.mark.anyio
async def test_role_queues_come_before_the_shared_queue() -> None:
    backend = ScriptedBackend(["shared"])
    backend.enqueue("plan-1", "plan-2", role="plan")
    backend.enqueue("fix", role="debug")
    assert backend.pending == 4
    assert (await backend.complete(req("debug"))).text == "fix"
    assert (await backend.complete(req("plan"))).text == "plan-1"
    assert (await backend.complete(req("code"))).text == "shared"
    assert (await backend.complete(req("plan"))).text == "plan-2"
    with pytest.raises(LLMError, match="role plan"):
        await backend.complete(req("plan"))


@pytest.mark.anyio
async def test_callables_replies_and_exceptions() -> None:
    canned = LLMReply(text="canned", usage=Usage(calls=1, cost_usd=0.5), model="fixed")
    backend = ScriptedBackend(
        [
            lambda r: f"echo {r.role}",
            lambda r: canned,
            canned,
            LLMCallFailed("overloaded", status_code=529),
            TimeoutError,
        ]
    )
    assert (await backend.complete(req("plan"))).text == "echo plan"
    assert (await backend.complete(req("code"))) is canned
    assert (await backend.complete(req("code"))).usage.cost_usd == 0.5
    with pytest.raises(LLMCallFailed, match="overloaded"):
        await backend.complete(req("debug"))
    with pytest.raises(TimeoutError):
        await backend.complete(req("debug"))
    assert len(backend.requests) == 5


@pytest.mark.anyio
async def test_usage_is_estimated_and_costs_nothing_unless_priced() -> None:
    backend = ScriptedBackend(["x" * 41])
    reply = await backend.complete(req("plan"))
    assert reply.model == "scripted" and reply.stop_reason == "end_turn"
    assert reply.usage.input_tokens == 25  # 100 characters / 4
    assert reply.usage.output_tokens == 11  # ceil(41 / 4)
    assert reply.usage.calls == 1
    assert reply.usage.cost_usd == 0.0  # no model was called

    prices = PriceTable(models={"m": ModelPrice(input=1e6, output=0, cache_read=0, cache_write=0)})
    custom = ScriptedBackend(["y"], model="m", prices=prices)
    assert (await custom.complete(req("plan"))).usage.cost_usd == pytest.approx(25.0)


@pytest.mark.anyio
async def test_structured_scripted_reply() -> None:
    backend = ScriptedBackend(['{"plan": "fuse"}', "not json"])
    schema = {"type": "object"}
    assert (await backend.complete(req("plan", json_schema=schema))).structured == {"plan": "fuse"}
    with pytest.raises(LLMOutputError):
        await backend.complete(req("plan", json_schema=schema))


def test_load_replies_from_json_and_jsonl(tmp_path: Path) -> None:
    as_json = tmp_path / "replies.json"
    as_json.write_text(json.dumps(["any role", {"text": "for plan", "role": "plan"}]))
    as_jsonl = tmp_path / "replies.jsonl"
    as_jsonl.write_text('"one"\n\n{"text": "two", "role": "code"}\n')
    as_pairs = tmp_path / "pairs.jsonl"
    as_pairs.write_text('{"text": "three", "role": "code", "pair": "relu:stark"}\n')

    def read(path: Path) -> list[tuple[str | None, str | None, str]]:
        return [(line.role, line.pair, line.text) for line in load_scripted_replies(path)]

    assert read(as_json) == [(None, None, "any role"), ("plan", None, "for plan")]
    assert read(as_jsonl) == [(None, None, "one"), ("code", None, "two")]
    assert read(as_pairs) == [("code", "relu:stark", "three")]


@pytest.mark.anyio
async def test_a_pairs_view_takes_its_own_replies_first_then_the_untied_ones(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                {"text": "a-code", "role": "code", "pair": "a"},
                {"text": "b-any", "pair": "b"},
                {"text": "untied"},
                {"text": "a-plan", "role": "plan", "pair": "a"},
            ]
        )
    )
    backend = ScriptedBackend.from_file(path)
    a, b = backend.for_pair("a"), backend.for_pair("b")
    assert (backend.pending, backend.unscoped) == (4, 1)
    # b asks first for code: its own reply, not a's, though a's comes first in the file
    assert (await b.complete(req("code"))).text == "b-any"
    assert (await a.complete(req("code"))).text == "a-code"
    assert (await a.complete(req("plan"))).text == "a-plan"
    assert (await b.complete(req("plan"))).text == "untied"  # b's own are spent: the untied one
    with pytest.raises(LLMError, match="no reply queued for role plan of pair a"):
        await a.complete(req("plan"))
    assert len(backend.requests) == 5 and a.model == "scripted" and a.name == "scripted"
    assert isinstance(a, LLMBackend)


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("r.json", "{broken", "not valid JSON"),
        ("r.json", '{"text": "x"}', "must be a JSON list"),
        ("r.json", '[{"text": "x", "colour": "red"}]', "reply 1 in"),
        ("r.jsonl", '"ok"\n42\n', "reply 2 in"),
    ],
)
def test_bad_reply_files(tmp_path: Path, name: str, content: str, match: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(LLMError, match=match):
        load_scripted_replies(path)
    with pytest.raises(LLMError, match="cannot read scripted replies"):
        load_scripted_replies(tmp_path / "missing.json")


@pytest.mark.anyio
async def test_factory_builds_a_scripted_backend(tmp_path: Path) -> None:
    path = tmp_path / "demo.jsonl"
    path.write_text('{"text": "plan text", "role": "plan"}\n"code text"\n')
    backend = backend_from_settings(spec=f"scripted:{path}")
    assert isinstance(backend, ScriptedBackend)
    assert (await backend.complete(req("code"))).text == "code text"
    assert (await backend.complete(req("plan"))).text == "plan text"

    from_env = backend_from_settings(Settings.from_env({"STARK_LLM": f"scripted:{path}"}))
    assert isinstance(from_env, ScriptedBackend) and from_env.pending == 2


def test_factory_errors() -> None:
    with pytest.raises(LLMError, match="unknown LLM backend 'openai'"):
        backend_from_settings(spec="openai")
    with pytest.raises(LLMError, match="needs a file"):
        backend_from_settings(spec="scripted:")
    with pytest.raises(MissingAPIKey, match="ANTHROPIC_API_KEY"):
        backend_from_settings(Settings.from_env({}))


@pytest.mark.anyio
@pytest.mark.xdist_group("anthropic_sdk")  # builds the real backend: on the worker that imports the SDK
async def test_factory_builds_the_anthropic_backend(fake: FakeAnthropic) -> None:
    fake.queue(text_reply("real path"))
    backend = backend_from_settings(
        Settings.from_env({"STARK_MODEL_PLAN": "claude-opus-4-8"}),
        "anthropic",
        model="claude-haiku-4-5",
        api_key="sk-ant-x",
        base_url=fake.base_url,
        max_retries=0,
    )
    assert backend.name == "anthropic"
    assert backend.profiles["code"].model == "claude-haiku-4-5"  # type: ignore[attr-defined]
    reply = await backend.complete(req("plan", max_tokens=100))
    await backend.aclose()  # type: ignore[attr-defined]
    assert reply.text == "real path"
    assert fake.requests[0].body["model"] == "claude-opus-4-8"
