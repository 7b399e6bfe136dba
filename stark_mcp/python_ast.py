"""Parsing Python source while other threads run.

CPython 3.11 keeps the AST constructor's recursion depth per interpreter, not per thread: when a
collection during one thread's parse lets another thread parse (or import a module without a
cached ``.pyc``, which parses too), the first parse can fail with ``SystemError: AST constructor
recursion depth mismatch`` on valid source (python/cpython#106905). The MCP server parses in tool
threads and its event loop at once; seen here as an evaluation that failed under a busy test run.
The parse is pure, so parsing again gives the right answer.
"""

from __future__ import annotations

import ast
from typing import Any

_MISMATCH = "AST constructor recursion depth mismatch"
_TRIES = 5


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """``ast.parse``, parsed again when another thread's parse disturbed it (SyntaxError as usual)."""
    for attempt in range(_TRIES):
        try:
            return ast.parse(source, filename=filename, mode=mode)
        except SystemError as exc:
            if _MISMATCH not in str(exc) or attempt == _TRIES - 1:
                raise
    raise AssertionError("unreachable")


def parse_or_error(source: str, filename: str = "<unknown>") -> ast.Module | SyntaxError:
    """The module, or the ``SyntaxError`` saying why ``source`` is none: kept, so that everything
    read from one source (its static checks, its kernels) shares one parse."""
    try:
        return parse(source, filename=filename)
    except SyntaxError as exc:
        return exc
