"""Choose a backend from the settings (``STARK_LLM``) or a short spec string (a CLI flag).

``anthropic`` (the default) is the real API; ``scripted:<path>`` replays the
replies in a JSON list or JSONL file, for demos and tests without a key.
"""

from __future__ import annotations

from typing import Any

from stark_mcp.config import Settings
from stark_mcp.llm.credentials import resolve_credential
from stark_mcp.llm.errors import LLMError
from stark_mcp.llm.pricing import PriceTable
from stark_mcp.llm.profiles import RoleProfile, default_profiles
from stark_mcp.llm.protocol import LLMBackend
from stark_mcp.llm.scripted import ScriptedBackend

SCRIPTED_PREFIX = "scripted:"


def backend_from_settings(
    settings: Settings | None = None,
    spec: str | None = None,
    *,
    model: str | None = None,
    profiles: dict[str, RoleProfile] | None = None,
    **anthropic_options: Any,
) -> LLMBackend:
    """``spec`` (else ``settings.llm``) turned into a backend.

    ``model`` (else ``settings.model``) picks the model of the default profiles, under the
    per-role choices of ``settings.role_models``; ``profiles`` replaces them; prices come from
    ``settings.prices``. ``anthropic_options`` go to ``AnthropicBackend`` (api_key, base_url, ...).
    """
    settings = settings or Settings()
    spec = (spec or settings.llm).strip()
    if spec == "anthropic":
        # Refused before the SDK loads; imported here so that scripted runs never load it.
        resolve_credential(anthropic_options.get("api_key"))
        from stark_mcp.llm.anthropic import AnthropicBackend

        chosen = profiles if profiles is not None else default_profiles(
            model or settings.model, settings.role_models
        )
        prices = anthropic_options.pop("prices", None) or PriceTable.from_file(settings.prices)
        return AnthropicBackend(chosen, prices=prices, **anthropic_options)
    if spec.startswith(SCRIPTED_PREFIX):
        path = spec[len(SCRIPTED_PREFIX) :]
        if not path:
            raise LLMError("scripted backend needs a file: scripted:<path to .json or .jsonl>")
        # Scripted replies cost nothing unless a price file names their model (a dry run of a
        # benchmark's cost accounting).
        prices = PriceTable.from_file(settings.prices) if settings.prices else None
        return ScriptedBackend.from_file(path, model=model or "scripted", prices=prices)
    raise LLMError(f"unknown LLM backend {spec!r}: use 'anthropic' or 'scripted:<path>'")
