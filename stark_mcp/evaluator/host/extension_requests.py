"""A compile request as it reaches the parent, and what its build came to.

A builder sends each ``load_inline`` call as a ``build_request`` frame; ``parse_request`` validates
it into a ``buildkit.ExtensionRequest`` (types, bounded sizes, the flags' types) or raises
``BadRequest``, which ends the candidate's build with ``build_error/request``. ``ExtensionBuild`` is
one request resolved by ``extension_builds.ExtensionCache``; its ``summary`` is what the build
manifest and ``Evaluation.extensions`` keep of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from stark_mcp.evaluator.buildkit.request import ExtensionRequest, check_limits


class BadRequest(ValueError):
    """A build request no honest ``load_inline`` call produces."""


def parse_request(frame: dict[str, Any]) -> ExtensionRequest:  # free-form: a builder's frame
    """The request inside a builder's ``build_request`` frame, or ``BadRequest`` saying why not."""
    data = frame.get("request")
    if not isinstance(data, dict):
        raise BadRequest("the frame holds no request object")
    try:
        request = ExtensionRequest.from_json(json.dumps(data))
        check_limits(request)
        for name in ("with_cuda",):
            if getattr(request, name) not in (None, True, False):
                raise ValueError(f"{name} must be true, false or null")
        for name in ("is_python_module", "with_pytorch_error_handling", "no_implicit_headers"):
            if not isinstance(getattr(request, name), bool):
                raise ValueError(f"{name} must be true or false")
    except (TypeError, ValueError) as exc:
        raise BadRequest(str(exc)[:500]) from None
    return request


class ExtensionSummary(TypedDict):
    """What the build manifest and ``Evaluation.extensions`` keep of one extension build (a plain
    dict on disk and in the record, so typed as a ``TypedDict``)."""

    name: str
    key: str
    layout: str
    ok: bool
    cached: bool
    seconds: float
    strategy: str  # the compile's strategy, as its report named it
    variants: list[str]  # the light variants its steps compiled
    fallbacks: list[str]
    primed: list[str]  # what was made in the shared toolchain directory for it


@dataclass
class ExtensionBuild:
    """One request resolved: ``directory`` holds ``<name>.so`` when ``ok``; ``log`` when not."""

    ok: bool
    key: str
    name: str
    layout: str
    directory: Path | None = None
    log: str = ""
    cached: bool = False
    seconds: float = 0.0
    primed: list[str] = field(default_factory=list)
    # free-form: build_report.json as the compile jail wrote it; summary() reads it defensively
    report: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> ExtensionSummary:
        steps = self.report.get("steps") if isinstance(self.report.get("steps"), list) else []
        return ExtensionSummary(
            name=self.name,
            key=self.key,
            layout=self.layout,
            ok=self.ok,
            cached=self.cached,
            seconds=round(self.seconds, 3),
            strategy=str(self.report.get("strategy", ""))[:20],
            variants=sorted({str(s.get("variant"))[:20] for s in steps if isinstance(s, dict)}),
            fallbacks=[str(f)[:300] for f in (self.report.get("fallbacks") or [])[:8]],
            primed=self.primed,
        )
