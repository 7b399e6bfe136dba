"""The trusted evaluator: builds, checks and times candidate kernels behind an OS wall.

See docs/evaluator.md. The parent side (the ``Evaluator`` service and its parts) is ``host/``; the
subpackages ``trusted/``, ``reference/``, ``untrusted/``, ``sandbox/``, ``common/`` and ``buildkit/``
run inside worker and sandboxed processes and import only the standard library and torch, so this
package's attributes load lazily: importing ``stark_mcp.evaluator.untrusted.runner`` must not pull
in pydantic or the service.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Candidate": "stark_mcp.evaluator.host.candidate",
    "Evaluator": "stark_mcp.evaluator.host.service",
    "EvaluatorError": "stark_mcp.evaluator.errors",
    "EvalSettings": "stark_mcp.evaluator.host.settings",
    "BASELINE_NAMES": "stark_mcp.evaluator.host.settings",
    "StaticResult": "stark_mcp.evaluator.host.static_checks",
    "check_candidate": "stark_mcp.evaluator.host.static_checks",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stark_mcp.evaluator' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
