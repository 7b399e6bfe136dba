from __future__ import annotations

from collections.abc import Iterator

import pytest
from llm_fake_api import FakeAnthropic

_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "STARK_MODEL",
    "STARK_MODEL_PLAN",
    "STARK_MODEL_CODE",
    "STARK_MODEL_DEBUG",
    "STARK_MODEL_GENERALIST",
    "STARK_PRICES",
    "STARK_LLM",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer key, endpoint or model choice may leak into these tests."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def _fake_server() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic(lifetime_s=300).start()
    yield server
    server.stop()


@pytest.fixture
def fake(_fake_server: FakeAnthropic) -> Iterator[FakeAnthropic]:
    _fake_server.reset()
    yield _fake_server
    _fake_server.reset()
