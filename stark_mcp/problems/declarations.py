"""Optional top-level constants a problem file may declare, read statically (pure).

``SHAPES = [{"batch": 8, "seq": 128}, ...]``
    The input sets the problem is judged on: ``get_inputs(**shape)`` is called with each. A
    candidate must be correct on every one; its time is the geometric mean over them. Without
    ``SHAPES`` a problem has one input set, ``get_inputs()``.
``STARK_IMPORT_ROOTS = ["/abs/path/to/project"]``
    Folders holding the user's code that the problem imports; the evaluator makes them
    importable (read-only) in its processes.
``STARK_TARGET = "package.module:ClassOrFunction"``
    What the problem was made from (``stark-mcp problem new``); an export can then be a
    drop-in replacement for it.

Each must be a literal that ``ast.literal_eval`` reads; anything else is a ``ProblemError``
naming the constant, so a problem never runs on shapes its author did not mean.
"""

from __future__ import annotations

import ast
import keyword
import math
import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from stark_mcp import python_ast
from stark_mcp.problems.errors import ProblemError

MAX_SHAPES = 16
DEFAULT_LABEL = "default"
_TARGET = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_NAMES = ("SHAPES", "STARK_IMPORT_ROOTS", "STARK_TARGET")


class Declarations(BaseModel):
    """What a problem file declares beyond ``Model``, ``get_inputs`` and ``get_init_inputs``."""

    model_config = ConfigDict(frozen=True)

    shapes: tuple[dict[str, Any], ...] = ()
    import_roots: tuple[str, ...] = ()
    target: str | None = None


def shape_label(shape: dict[str, Any]) -> str:
    """``batch=8,seq=128`` for ``{"batch": 8, "seq": 128}``; ``default`` for no keyword arguments."""
    if not shape:
        return DEFAULT_LABEL
    return ",".join(f"{key}={_label_value(value)}" for key, value in shape.items())


def might_declare(source: str) -> bool:
    """Cheap pre-filter: only sources naming a declaration are parsed for one."""
    return any(name in source for name in _NAMES)


def read_declarations(tree: ast.Module, label: str) -> Declarations:
    """The declarations of a parsed problem module; ProblemError if one is malformed."""
    values = {name: _literal(tree, name, label) for name in _NAMES}
    shapes = _shapes(values["SHAPES"], label) if values["SHAPES"] is not None else ()
    if shapes:
        _check_get_inputs_accepts(tree, shapes, label)
    roots = _roots(values["STARK_IMPORT_ROOTS"], label) if values["STARK_IMPORT_ROOTS"] is not None else ()
    target = _target(values["STARK_TARGET"], label) if values["STARK_TARGET"] is not None else None
    return Declarations(shapes=shapes, import_roots=roots, target=target)


def declarations_of(source: str, label: str = "problem") -> Declarations:
    """Declarations of a source text. A source that does not parse declares nothing: its syntax
    error is reported by the loader's own check, with the line."""
    if not might_declare(source):
        return Declarations()
    try:
        tree = python_ast.parse(source, filename=label)
    except SyntaxError:
        return Declarations()
    return read_declarations(tree, label)


def literal_constant(source: str, name: str, label: str = "problem") -> Any:
    """The value of a top-level ``NAME = <literal>`` in ``source``; None if there is none."""
    return _literal(python_ast.parse(source, filename=label), name, label)


# ---- the constants, one by one ---------------------------------------------------------------


def _literal(tree: ast.Module, name: str, label: str) -> Any:
    """The value of the one top-level ``NAME = <literal>``, or None when the module has none."""
    found: list[ast.expr] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(_is(t, name) for t in stmt.targets):
            found.append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and _is(stmt.target, name):
            if stmt.value is None:
                raise ProblemError(f"{label}: {name} is annotated but never given a value")
            found.append(stmt.value)
        elif isinstance(stmt, ast.AugAssign) and _is(stmt.target, name):
            raise ProblemError(
                f"{label}: line {stmt.lineno}: {name} is changed after its assignment; "
                "give its whole value in one literal"
            )
    if not found:
        return None
    if len(found) > 1:
        raise ProblemError(f"{label}: {name} is assigned {len(found)} times at top level; assign it once")
    try:
        return ast.literal_eval(found[0])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ProblemError(
            f"{label}: line {found[0].lineno}: {name} must be a literal (a list of dicts of numbers, "
            "strings, booleans or None) that can be read without running the file"
        ) from None


def _is(target: ast.expr, name: str) -> bool:
    return isinstance(target, ast.Name) and target.id == name


def _shapes(value: Any, label: str) -> tuple[dict[str, Any], ...]:
    example = 'e.g. SHAPES = [{"batch": 8, "seq": 128}, {"batch": 32, "seq": 512}]'
    if not isinstance(value, (list, tuple)) or not value:
        raise ProblemError(
            f"{label}: SHAPES must be a non-empty list of dicts of keyword arguments, {example}"
        )
    if len(value) > MAX_SHAPES:
        raise ProblemError(
            f"{label}: SHAPES lists {len(value)} input sets; at most {MAX_SHAPES} (each one is evaluated "
            "on every attempt)"
        )
    seen: dict[str, int] = {}
    for index, shape in enumerate(value):
        where = f"{label}: SHAPES[{index}]"
        if not isinstance(shape, dict):
            raise ProblemError(
                f"{where} is {type(shape).__name__}, not a dict of keyword arguments, {example}"
            )
        for key, item in shape.items():
            if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
                raise ProblemError(f"{where}: key {key!r} is not a Python parameter name")
            if not _plain_value(item):
                raise ProblemError(
                    f"{where}: {key}={item!r} is not a plain value (numbers, strings, booleans, None, "
                    "or lists and tuples of them)"
                )
        text = shape_label(shape)
        if text in seen:
            raise ProblemError(f"{where} repeats SHAPES[{seen[text]}] ({text}); list each input set once")
        seen[text] = index
    return tuple(dict(shape) for shape in value)


def _plain_value(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_plain_value(v) for v in value)
    return False


def _label_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "x".join(_label_value(v) for v in value)
    return str(value)


def _check_get_inputs_accepts(tree: ast.Module, shapes: tuple[dict[str, Any], ...], label: str) -> None:
    """Every shape's keys must be parameters of ``get_inputs``, covering the ones without defaults."""
    func = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "get_inputs"), None)
    if func is None:  # bound some other way (an import, an assignment): checked when it runs
        return
    args = func.args
    if args.kwarg is not None:
        return
    named = [a.arg for a in args.posonlyargs + args.args]
    keywords = [a.arg for a in args.args + args.kwonlyargs]  # positional-only ones cannot take a keyword
    positional_defaults = len(args.defaults)
    required = [a.arg for a in (args.posonlyargs + args.args)[: len(named) - positional_defaults]]
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]
    for index, shape in enumerate(shapes):
        unknown = [k for k in shape if k not in keywords]
        if unknown:
            accepted = ", ".join(keywords) or "no arguments"
            raise ProblemError(
                f"{label}: SHAPES[{index}] passes {', '.join(unknown)} but get_inputs accepts {accepted}; "
                "get_inputs(**shape) must accept every key of every shape"
            )
        missing = [r for r in required if r not in shape]
        if missing:
            raise ProblemError(
                f"{label}: SHAPES[{index}] does not give get_inputs its required argument(s) "
                f"{', '.join(missing)}"
            )


def _roots(value: Any, label: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ProblemError(
            f'{label}: STARK_IMPORT_ROOTS must be a list of folder paths, e.g. ["/home/me/project"]'
        )
    for root in value:
        if not os.path.isabs(root):
            raise ProblemError(
                f"{label}: STARK_IMPORT_ROOTS entry {root!r} is not an absolute path; the evaluator runs "
                "the problem from a private folder, so relative paths would point nowhere"
            )
    return tuple(dict.fromkeys(os.path.normpath(v) for v in value))


def _target(value: Any, label: str) -> str:
    if not isinstance(value, str) or not _TARGET.match(value):
        raise ProblemError(f'{label}: STARK_TARGET must be "package.module:Name", got {value!r}')
    return value
