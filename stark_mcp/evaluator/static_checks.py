"""Checks on the candidate source before any process starts (pure)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from stark_mcp import python_ast
from stark_mcp.evaluator.kernels import cuda_kernel_names, triton_kernel_names
from stark_mcp.problems.loading import top_level_names
from stark_mcp.records import Status

_BUILD_MARKERS = ("load_inline", "cpp_extension")
_FAST_MATH = re.compile(r"""['"]-{1,2}use_fast_math['"]""")
_DEVICE_DEBUG = re.compile(r"""['"]-G['"]""")
_CUDA_SOURCES = re.compile(r"\bcuda_sources\s*=|\.cu['\"]|__global__")


@dataclass
class StaticResult:
    """A verdict when the source fails outright, else None, plus flags that never change the status."""

    status: Status | None = None
    reason: str | None = None
    message: str = ""
    flags: list[str] = field(default_factory=list)
    needs_build: bool = False
    languages: set[str] = field(default_factory=set)


def kernel_languages(source: str) -> set[str]:
    """What the candidate writes kernels in: ``triton`` (``@triton.jit`` functions), ``cuda``
    (an extension with CUDA sources), ``cpp`` (an extension of C++ alone). Empty for a
    candidate of PyTorch operators only."""
    found = set()
    if triton_kernel_names(source):
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


def check_candidate(source: str) -> StaticResult:
    flags = []
    if _FAST_MATH.search(source):
        flags.append("fast_math")
    if _DEVICE_DEBUG.search(source):
        flags.append("debug_device_code")
    result = StaticResult(
        flags=flags, needs_build=any(m in source for m in _BUILD_MARKERS), languages=kernel_languages(source)
    )
    try:
        tree = python_ast.parse(source, filename="candidate.py")
    except SyntaxError as exc:
        result.status, result.reason = Status.LOAD_ERROR, "syntax"
        result.message = f"syntax error at line {exc.lineno}: {exc.msg}" + (
            f"\n    {exc.text.rstrip()}" if exc.text else ""
        )
        return result
    if "ModelNew" not in top_level_names(tree):
        result.status, result.reason = Status.LOAD_ERROR, "no_model_new"
        result.message = "the candidate defines no top-level ModelNew (class ModelNew(nn.Module))"
        return result
    line = _uses_reference(tree)
    if line is not None:
        result.status, result.reason = Status.REJECTED, "reference_model"
        result.message = (
            f"line {line}: the candidate uses the reference Model (subclassing or calling it); "
            "ModelNew must implement the computation itself"
        )
    return result
