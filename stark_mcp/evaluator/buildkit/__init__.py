"""Fast, equivalent builds of ``load_inline`` extensions (see docs/evaluator.md, "Builds").

Imports only the standard library and torch, and only relatively inside the package, so the
evaluator can import it as ``buildkit`` from sandboxed processes where ``stark_mcp`` is absent.
"""

from .build_report import BuildReport, StepRecord
from .compile import build
from .intercept import BuildFailed, LocalResolver, install, load_built, local_resolver, uninstall
from .normalize import normalize_source
from .request import (
    ExtensionRequest,
    Toolchain,
    check_limits,
    flags_are_plain,
    is_cacheable,
    layout,
    request_key,
)

__all__ = [
    "BuildFailed",
    "BuildReport",
    "ExtensionRequest",
    "LocalResolver",
    "StepRecord",
    "Toolchain",
    "build",
    "check_limits",
    "flags_are_plain",
    "install",
    "is_cacheable",
    "layout",
    "load_built",
    "local_resolver",
    "normalize_source",
    "request_key",
    "uninstall",
]
