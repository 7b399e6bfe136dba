"""Evaluator settings from the command line's options (``--baselines``, ``--eval-settings``).

Apart from ``session.py`` (which re-exports it) so that ``stark-mcp eval``, handing its evaluation to
the warm evaluator, need not import the store, the agents and the run service to parse its options.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from stark_mcp.evaluator import EvalSettings
from stark_mcp.orchestrator.errors import InvalidInput


def parse_eval_settings(baselines: str | None = None, overrides: str | None = None) -> EvalSettings:
    """Evaluator settings from a comma-separated baseline list and a JSON object of other fields
    (the CLI's ``--baselines`` and ``--eval-settings``); ``InvalidInput`` names what is wrong."""
    fields: dict[str, Any] = {}
    if overrides:
        try:
            fields = json.loads(overrides)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"--eval-settings is not JSON: {exc}") from None
        if not isinstance(fields, dict):
            raise InvalidInput("--eval-settings must be a JSON object of EvalSettings fields")
    unknown = sorted(set(fields) - set(EvalSettings.model_fields))
    if unknown:
        raise InvalidInput(f"--eval-settings: unknown field(s) {', '.join(unknown)}")
    if baselines is not None:
        fields["baselines"] = tuple(name.strip() for name in baselines.split(",") if name.strip())
    try:
        return EvalSettings(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "evaluator settings"
        raise InvalidInput(f"{where}: {error['msg']}") from None
