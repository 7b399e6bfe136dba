"""Checks on the candidate source before any process starts (pure)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from stark_mcp import python_ast
from stark_mcp.evaluator.host.own_kernels import cuda_kernel_names, triton_kernel_names
from stark_mcp.problems.loading import top_level_names
from stark_mcp.records import Status

_BUILD_MARKERS = ("load_inline", "cpp_extension")
_FAST_MATH = re.compile(r"""['"]-{1,2}use_fast_math['"]""")
_DEVICE_DEBUG = re.compile(r"""['"]-G['"]""")
_CUDA_SOURCES = re.compile(r"\bcuda_sources\s*=|\.cu['\"]|__global__")


@dataclass(frozen=True)
class StaticResult:
    """A verdict when the source fails outright, else None, plus flags that never change the status.
    Frozen, and its ``flags`` never changed in place: a ``Candidate`` keeps one for all its readers."""

    status: Status | None = None
    reason: str | None = None
    message: str = ""
    flags: list[str] = field(default_factory=list)
    needs_build: bool = False
    languages: frozenset[str] = frozenset()


def kernel_languages(source: str, parsed: ast.Module | SyntaxError | None = None) -> set[str]:
    """What the candidate writes kernels in: ``triton`` (``@triton.jit`` functions), ``cuda``
    (an extension with CUDA sources), ``cpp`` (an extension of C++ alone). Empty for a
    candidate of PyTorch operators only. ``parsed``: the source's parse, where the caller has it."""
    found = set()
    if triton_kernel_names(source, parsed):
        found.add("triton")
    if cuda_kernel_names(source) or _CUDA_SOURCES.search(source):
        found.add("cuda")
    elif any(m in source for m in _BUILD_MARKERS):
        found.add("cpp")
    return found


def _uses_reference(tree: ast.Module) -> int | None:
    """Line of the first read of a name or attribute called ``Model`` (subclassing or calling it)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Model" and isinstance(node.ctx, ast.Load):
            return node.lineno
        if isinstance(node, ast.Attribute) and node.attr == "Model" and isinstance(node.ctx, ast.Load):
            return node.lineno
    return None


def check_candidate(source: str, parsed: ast.Module | SyntaxError | None = None) -> StaticResult:
    """The static verdict on ``source`` (``parsed``: its parse or SyntaxError, made here if not given;
    ``Candidate.static`` gives its one parse)."""
    tree = python_ast.parse_or_error(source, filename="candidate.py") if parsed is None else parsed
    flags = []
    if _FAST_MATH.search(source):
        flags.append("fast_math")
    if _DEVICE_DEBUG.search(source):
        flags.append("debug_device_code")
    facts = {
        "flags": flags,
        "needs_build": any(m in source for m in _BUILD_MARKERS),
        "languages": frozenset(kernel_languages(source, tree)),
    }
    if isinstance(tree, SyntaxError):
        message = f"syntax error at line {tree.lineno}: {tree.msg}" + (
            f"\n    {tree.text.rstrip()}" if tree.text else ""
        )
        return StaticResult(Status.LOAD_ERROR, "syntax", message, **facts)
    if "ModelNew" not in top_level_names(tree):
        message = "the candidate defines no top-level ModelNew (class ModelNew(nn.Module))"
        return StaticResult(Status.LOAD_ERROR, "no_model_new", message, **facts)
    line = _uses_reference(tree)
    if line is not None:
        message = (
            f"line {line}: the candidate uses the reference Model (subclassing or calling it); "
            "ModelNew must implement the computation itself"
        )
        return StaticResult(Status.REJECTED, "reference_model", message, **facts)
    return StaticResult(**facts)
