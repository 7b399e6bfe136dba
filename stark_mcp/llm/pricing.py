"""USD prices per million tokens and the cost of one call.

The defaults are list prices as we knew them when writing this (approximate, and
they change): override or extend them with a JSON file (``STARK_PRICES``, see ``from_file``),
shaped ``{"<model id>": {"input": 3.0, "output": 15.0, "cache_read": 0.3,
"cache_write": 3.75}, ...}``. File entries replace the defaults of the same id and
add new ids. A model with no entry costs 0.0 and is warned about once per table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from stark_mcp.llm.errors import LLMError
from stark_mcp.records import Usage

log = logging.getLogger(__name__)

_MILLION = 1_000_000


class ModelPrice(BaseModel):
    """USD per million tokens. ``cache_write`` is the 5-minute-TTL write price."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(ge=0)


def _family(input_usd: float, output_usd: float) -> ModelPrice:
    # Anthropic's cache pricing is a fixed multiple of the input price: reads 0.1x, 5-minute writes 1.25x.
    return ModelPrice(
        input=input_usd,
        output=output_usd,
        cache_read=round(input_usd * 0.1, 6),
        cache_write=round(input_usd * 1.25, 6),
    )


_OPUS_4_5_ON = _family(5.0, 25.0)
_SONNET_4 = _family(3.0, 15.0)
_HAIKU_4_5 = _family(1.0, 5.0)

DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-opus-4-8": _OPUS_4_5_ON,
    "claude-opus-4-7": _OPUS_4_5_ON,
    "claude-opus-4-6": _OPUS_4_5_ON,
    "claude-opus-4-5": _OPUS_4_5_ON,
    "claude-opus-4-1": _family(15.0, 75.0),
    "claude-opus-4-0": _family(15.0, 75.0),
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-0": _SONNET_4,
    "claude-haiku-4-5": _HAIKU_4_5,
}


class PriceTable(BaseModel):
    models: dict[str, ModelPrice] = Field(default_factory=dict)

    _warned: set[str] = PrivateAttr(default_factory=set)

    @classmethod
    def default(cls) -> PriceTable:
        return cls(models=dict(DEFAULT_PRICES))

    @classmethod
    def load(cls, path: str | Path, *, base: Mapping[str, ModelPrice] | None = None) -> PriceTable:
        """Read a price file; its entries override ``base`` (the defaults unless given)."""
        path = Path(path)
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise LLMError(f"cannot read price table {path}: {exc}") from exc
        if not isinstance(raw, dict):
            raise LLMError(f"price table {path} must be a JSON object of model id -> prices")
        try:
            entries = {str(model): ModelPrice.model_validate(price) for model, price in raw.items()}
        except ValidationError as exc:
            raise LLMError(f"bad price table {path}: {exc}") from exc
        merged = dict(DEFAULT_PRICES if base is None else base)
        merged.update(entries)
        return cls(models=merged)

    @classmethod
    def from_file(cls, path: str | Path | None) -> PriceTable:
        """The table of ``path`` (``STARK_PRICES``) over the defaults, or the defaults alone."""
        return cls.load(path) if path else cls.default()

    def price(self, model: str) -> ModelPrice | None:
        """The exact id, else the longest listed id that ``model`` extends (dated snapshots)."""
        if model in self.models:
            return self.models[model]
        candidates = [known for known in self.models if model.startswith(known + "-")]
        return self.models[max(candidates, key=len)] if candidates else None

    def cost(self, model: str, usage: Usage) -> float:
        price = self.price(model)
        if price is None:
            if model not in self._warned:
                self._warned.add(model)
                log.warning(
                    "no price for model %r: its calls count as $0; add it to a STARK_PRICES file", model
                )
            return 0.0
        return (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + usage.cache_read_tokens * price.cache_read
            + usage.cache_write_tokens * price.cache_write
        ) / _MILLION

    def priced(self, model: str, usage: Usage) -> Usage:
        """``usage`` with its ``cost_usd`` filled in from this table."""
        return usage.model_copy(update={"cost_usd": self.cost(model, usage)})
