"""Per-role generation settings, and how the paper's temperatures map onto them.

STARK samples the plan agent at temperature 0.8 (explore) and the code and debug
agents at 0.1 (execute faithfully). anthropic 2.x has no temperature argument,
API version 2026-10-21 rejects it and models after Opus 4.6 reject it on any
version, so the defaults express the same intent with what the API offers:

- plan (explore): ``effort="high"`` with adaptive thinking, so the model weighs
  several optimizations before committing to one; variety between plan calls
  comes from the agents layer, which samples a different context window
  (seeded) for every expansion.
- code, debug (execute): ``effort="medium"`` with adaptive thinking: enough
  reasoning to write or repair a kernel, no license to wander from the plan.
- generalist (one agent doing everything, a baseline): ``effort="high"``.

A profile may still carry a ``temperature``; it is sent only to models listed in
``TEMPERATURE_MODEL_PREFIXES`` and only with thinking off (see ``docs/llm.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Effort = Literal["low", "medium", "high", "xhigh", "max"]
Thinking = Literal["adaptive", "enabled", "disabled"]

DEFAULT_MODEL = "claude-sonnet-4-6"

# Models that still take a sampling temperature on the pre-2026 API version. Newer
# ones (Opus 4.7 on, the 5.x families) return 400 for it on any version.
TEMPERATURE_MODEL_PREFIXES: tuple[str, ...] = (
    "claude-3",
    "claude-opus-4-0",
    "claude-opus-4-1",
    "claude-opus-4-5",
    "claude-opus-4-6",
    "claude-sonnet-4-0",
    "claude-sonnet-4-5",
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
)

MIN_THINKING_BUDGET = 1024


class RoleProfile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1)
    max_tokens: int = Field(16000, gt=0)
    effort: Effort | None = None
    thinking: Thinking | None = None
    thinking_budget: int | None = Field(None, description='tokens of reasoning for thinking="enabled"')
    temperature: float | None = Field(
        None, ge=0.0, le=1.0, description="the paper's intent; sent only where the model/API accepts it"
    )

    @model_validator(mode="after")
    def _budget_fits(self) -> RoleProfile:
        if self.thinking_budget is not None:
            if self.thinking != "enabled":
                raise ValueError('thinking_budget only applies to thinking="enabled"')
            if not MIN_THINKING_BUDGET <= self.thinking_budget < self.max_tokens:
                raise ValueError(
                    f"thinking_budget must be at least {MIN_THINKING_BUDGET} and below max_tokens "
                    f"({self.max_tokens}); got {self.thinking_budget}"
                )
        return self

    def sends_temperature(self) -> bool:
        """Whether a request with this profile may carry its temperature."""
        return (
            self.temperature is not None
            and self.thinking in (None, "disabled")
            and model_accepts_temperature(self.model)
        )


def model_accepts_temperature(model: str) -> bool:
    return any(model == p or model.startswith(p + "-") for p in TEMPERATURE_MODEL_PREFIXES)


def default_profiles(
    model: str | None = None, role_models: Mapping[str, str] | None = None
) -> dict[str, RoleProfile]:
    """Profiles for plan, code, debug and generalist.

    Each role's model is ``role_models[role]`` (``STARK_MODEL_<ROLE>``), else ``model``
    (``--model`` or ``STARK_MODEL``), else ``DEFAULT_MODEL``.
    """
    base = model or DEFAULT_MODEL
    chosen = role_models or {}

    def pick(role: str) -> str:
        return chosen.get(role) or base

    return {
        "plan": RoleProfile(model=pick("plan"), max_tokens=16000, effort="high", thinking="adaptive"),
        "code": RoleProfile(model=pick("code"), max_tokens=32000, effort="medium", thinking="adaptive"),
        "debug": RoleProfile(model=pick("debug"), max_tokens=32000, effort="medium", thinking="adaptive"),
        "generalist": RoleProfile(
            model=pick("generalist"), max_tokens=32000, effort="high", thinking="adaptive"
        ),
    }
