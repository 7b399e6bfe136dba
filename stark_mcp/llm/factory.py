"""Choose a backend from a short spec string (CLI flag or ``STARK_LLM``).

``anthropic`` (the default) is the real API; ``scripted:<path>`` replays the
replies in a JSON list or JSONL file, for demos and tests without a key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from stark_mcp.llm.errors import LLMError
from stark_mcp.llm.profiles import RoleProfile, default_profiles
from stark_mcp.llm.protocol import LLMBackend
from stark_mcp.llm.scripted import ScriptedBackend

SCRIPTED_PREFIX = "scripted:"


def backend_from_settings(
    spec: str | None = None,
    *,
    model: str | None = None,
    profiles: dict[str, RoleProfile] | None = None,
    environ: Mapping[str, str] | None = None,
    **anthropic_options: Any,
) -> LLMBackend:
    """``spec`` (else ``STARK_LLM``, else ``"anthropic"``) turned into a backend.

    ``model`` picks the model of the default profiles (``profiles`` replaces them);
    ``anthropic_options`` go to ``AnthropicBackend`` (api_key, base_url, timeout_s, ...).
    """
    env = os.environ if environ is None else environ
    spec = (spec or env.get("STARK_LLM") or "anthropic").strip()
    if spec == "anthropic":
        # Imported here so that scripted runs never load the SDK.
        from stark_mcp.llm.anthropic import AnthropicBackend

        chosen = profiles if profiles is not None else default_profiles(model, environ=env)
        return AnthropicBackend(chosen, **anthropic_options)
    if spec.startswith(SCRIPTED_PREFIX):
        path = spec[len(SCRIPTED_PREFIX) :]
        if not path:
            raise LLMError("scripted backend needs a file: scripted:<path to .json or .jsonl>")
        return ScriptedBackend.from_file(path, model=model or "scripted")
    raise LLMError(f"unknown LLM backend {spec!r}: use 'anthropic' or 'scripted:<path>'")
