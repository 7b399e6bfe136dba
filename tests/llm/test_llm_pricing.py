"""The price table: cost arithmetic, family matching, files and the unknown-model warning."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from stark_mcp.config import Settings
from stark_mcp.llm import DEFAULT_PRICES, LLMError, ModelPrice, PriceTable
from stark_mcp.records import Usage


def test_cost_adds_every_token_kind() -> None:
    table = PriceTable(models={"m": ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)})
    usage = Usage(input_tokens=2_000, output_tokens=1_000, cache_read_tokens=10_000, cache_write_tokens=4_000)
    assert table.cost("m", usage) == pytest.approx((6_000 + 15_000 + 3_000 + 15_000) / 1e6)
    priced = table.priced("m", usage)
    assert priced.cost_usd == pytest.approx(0.039) and priced.input_tokens == 2_000


def test_defaults_follow_the_cache_multipliers() -> None:
    sonnet = PriceTable.default().price("claude-sonnet-4-6")
    assert sonnet == ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    assert PriceTable.default().price("claude-haiku-4-5-20251001") == DEFAULT_PRICES["claude-haiku-4-5"]


def test_longest_family_wins() -> None:
    table = PriceTable(
        models={
            "claude-x": ModelPrice(input=1, output=1, cache_read=1, cache_write=1),
            "claude-x-2": ModelPrice(input=2, output=2, cache_read=2, cache_write=2),
        }
    )
    assert table.price("claude-x-2-20260101").input == 2
    assert table.price("claude-x-3").input == 1
    assert table.price("claude-xy") is None


def test_unknown_model_costs_zero_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    table = PriceTable.default()
    with caplog.at_level(logging.WARNING, logger="stark_mcp.llm.pricing"):
        for _ in range(3):
            assert table.cost("mystery-model", Usage(input_tokens=10**6, output_tokens=10**6)) == 0.0
    warnings = [r for r in caplog.records if "mystery-model" in r.getMessage()]
    assert len(warnings) == 1
    assert "STARK_PRICES" in warnings[0].getMessage()


def test_price_file_overrides_and_extends_defaults(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "claude-sonnet-4-6": {"input": 1, "output": 2, "cache_read": 0.1, "cache_write": 1.5},
                "my-local-model": {"input": 0, "output": 0.5, "cache_read": 0, "cache_write": 0},
            }
        )
    )
    table = PriceTable.load(path)
    assert table.price("claude-sonnet-4-6").input == 1
    assert table.price("my-local-model").output == 0.5
    assert table.price("claude-opus-4-6") == DEFAULT_PRICES["claude-opus-4-6"]


def test_price_table_from_environment(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"zz": {"input": 9, "output": 9, "cache_read": 9, "cache_write": 9}}))
    assert PriceTable.from_file(Settings.from_env({"STARK_PRICES": str(path)}).prices).price("zz").input == 9
    assert PriceTable.from_file(Settings.from_env({}).prices).price("zz") is None


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("not json", "cannot read price table"),
        ("[1, 2]", "must be a JSON object"),
        ('{"m": {"input": 1}}', "bad price table"),
        ('{"m": {"input": -1, "output": 1, "cache_read": 1, "cache_write": 1}}', "bad price table"),
    ],
)
def test_bad_price_files(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(LLMError, match=match):
        PriceTable.load(path)


def test_missing_price_file(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="cannot read price table"):
        PriceTable.load(tmp_path / "absent.json")
