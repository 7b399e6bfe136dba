"""Role profiles, the temperature rule and the pure request/reply translation."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from stark_mcp.config import Settings
from stark_mcp.llm import (
    DEFAULT_MODEL,
    ROLES,
    LLMError,
    LLMOutputError,
    LLMRequest,
    RoleProfile,
    default_profiles,
    model_accepts_temperature,
)
from stark_mcp.llm.wire import build_params, parse_structured, reply_text, usage_from


def test_default_profiles_map_the_papers_temperatures() -> None:
    profiles = default_profiles()
    assert set(profiles) == set(ROLES)
    assert {p.model for p in profiles.values()} == {DEFAULT_MODEL}
    # plan explores (paper: T=0.8), code and debug execute (paper: T=0.1)
    assert profiles["plan"].effort == "high"
    assert profiles["code"].effort == profiles["debug"].effort == "medium"
    assert all(p.thinking == "adaptive" and p.temperature is None for p in profiles.values())
    assert not any(p.sends_temperature() for p in profiles.values())


def test_model_choice_from_settings_and_argument() -> None:
    settings = Settings.from_env({"STARK_MODEL": "claude-opus-4-8", "STARK_MODEL_DEBUG": "claude-haiku-4-5"})
    profiles = default_profiles(settings.model, settings.role_models)
    assert profiles["plan"].model == "claude-opus-4-8"
    assert profiles["debug"].model == "claude-haiku-4-5"
    assert default_profiles("claude-sonnet-5", settings.role_models)["code"].model == "claude-sonnet-5"
    assert default_profiles("claude-sonnet-5", settings.role_models)["debug"].model == "claude-haiku-4-5"


def test_profiles_are_frozen_and_validated() -> None:
    profile = RoleProfile(model="m")
    with pytest.raises(ValidationError):
        profile.max_tokens = 5  # type: ignore[misc]
    with pytest.raises(ValidationError, match="thinking_budget only applies"):
        RoleProfile(model="m", thinking_budget=2048)
    with pytest.raises(ValidationError, match="below max_tokens"):
        RoleProfile(model="m", max_tokens=2000, thinking="enabled", thinking_budget=4000)
    with pytest.raises(ValidationError):
        RoleProfile(model="m", effort="extreme")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        RoleProfile(model="m", temperature=1.5)


@pytest.mark.parametrize(
    ("model", "accepts"),
    [
        ("claude-haiku-4-5", True),
        ("claude-haiku-4-5-20251001", True),
        ("claude-sonnet-4-6", True),
        ("claude-opus-4-6", True),
        ("claude-opus-4-7", False),
        ("claude-opus-4-60", False),
        ("claude-sonnet-5-5", False),
        ("claude-fable-5", False),
    ],
)
def test_which_models_take_a_temperature(model: str, accepts: bool) -> None:
    assert model_accepts_temperature(model) is accepts


def test_temperature_needs_thinking_off() -> None:
    base = {"model": "claude-haiku-4-5", "temperature": 0.8}
    assert RoleProfile(**base).sends_temperature()
    assert RoleProfile(**base, thinking="disabled").sends_temperature()
    assert not RoleProfile(**base, thinking="adaptive").sends_temperature()
    assert not RoleProfile(model="claude-haiku-4-5").sends_temperature()


def test_build_params_with_temperature_pins_the_older_api_version() -> None:
    profile = RoleProfile(model="claude-haiku-4-5", max_tokens=900, temperature=0.1, effort="low")
    params = build_params(LLMRequest(role="code", system="s", body="b"), profile)
    assert params["extra_body"] == {"temperature": 0.1}
    assert params["extra_headers"] == {"anthropic-version": "2023-06-01"}
    assert params["output_config"] == {"effort": "low"}
    assert params["max_tokens"] == 900


def test_build_params_rejects_an_empty_user_turn() -> None:
    with pytest.raises(LLMError, match="nothing to send"):
        build_params(LLMRequest(role="plan", system="s", body=""), RoleProfile(model="m"))


def test_build_params_prefix_only() -> None:
    params = build_params(LLMRequest(role="plan", system="", prefix="p", body=""), RoleProfile(model="m"))
    assert params["messages"][0]["content"] == [
        {"type": "text", "text": "p", "cache_control": {"type": "ephemeral"}}
    ]
    assert "output_config" not in params and "thinking" not in params and "extra_body" not in params


def test_reply_text_and_usage_translation() -> None:
    blocks = [
        SimpleNamespace(type="thinking", thinking="hmm"),
        SimpleNamespace(type="text", text="a"),
        SimpleNamespace(type="redacted_thinking", data="x"),
        SimpleNamespace(type="text", text="b"),
    ]
    assert reply_text(blocks) == "ab"
    api_usage = SimpleNamespace(
        input_tokens=7, output_tokens=3, cache_read_input_tokens=None, cache_creation_input_tokens=11
    )
    usage = usage_from(api_usage)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        7,
        3,
        0,
        11,
    )
    assert usage.calls == 1 and usage.cost_usd == 0.0


def test_parse_structured() -> None:
    assert parse_structured('{"a": [1, 2]}', "end_turn") == {"a": [1, 2]}
    with pytest.raises(LLMOutputError, match="expected an object"):
        parse_structured("[1, 2]", "end_turn")
    with pytest.raises(LLMOutputError, match="not valid JSON") as excinfo:
        parse_structured("{oops", "end_turn")
    assert "max_tokens" not in str(excinfo.value) and excinfo.value.stop_reason == "end_turn"


def test_request_validation() -> None:
    with pytest.raises(ValidationError):
        LLMRequest(role="plan", system="s", body="b", max_tokens=0)
