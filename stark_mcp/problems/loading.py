"""Find a problem by path, JSONL entry or KernelBench checkout, and check its shape.

Static checks only: the source must parse and define ``Model``, ``get_inputs`` and
``get_init_inputs`` at top level, and its optional declarations (``SHAPES``,
``STARK_IMPORT_ROOTS``, ``STARK_TARGET``; see ``declarations``) must be well formed.
Whether it imports and runs is checked by the evaluator's trusted reference process,
which reports through ``ProblemError`` too.

Accepted specs:
  ``path/to/problem.py``
  ``path/to/problems.jsonl:LEVEL/ID`` or ``:LEVEL/NAME`` (e.g. ``problems.jsonl:1/19``)
  ``path/to/KernelBench:LEVEL/ID`` (a checkout; files ``KernelBench/level{L}/{ID}_*.py``)
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from stark_mcp import python_ast
from stark_mcp.problems.declarations import read_declarations
from stark_mcp.problems.errors import ProblemError
from stark_mcp.problems.problem import Problem

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
_SELECTOR = re.compile(r"^(?P<level>\d+)/(?P<key>[^/]+)$")


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at top level: defs, classes, plain and annotated assignments, imports."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    return names


NOT_A_PROBLEM = (
    "not a problem file: a problem is a Python (.py) file defining class Model(nn.Module), "
    "get_inputs() and get_init_inputs()"
)


def check_source(source: str, label: str, quote: bool = True) -> None:
    """Raise ProblemError unless ``source`` parses and defines the required names. ``quote``: the
    source is meant to be Python (given as text, or a .py file), so a syntax error may show its
    line; otherwise (any other file) nothing of the text is shown, only that it is no problem."""
    try:
        tree = python_ast.parse(source, filename=label)
    except SyntaxError as exc:
        if not quote:
            raise ProblemError(f"{label}: {NOT_A_PROBLEM}") from None
        raise ProblemError(
            f"{label}: syntax error at line {exc.lineno}: {exc.msg}"
            + (f"\n    {exc.text.rstrip()}" if exc.text else "")
        ) from None
    defined = top_level_names(tree)
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise ProblemError(
            f"{label}: missing {', '.join(missing)}; a problem defines class Model(nn.Module), "
            "get_inputs() returning the forward arguments and get_init_inputs() returning the "
            "constructor arguments"
        )
    read_declarations(tree, label)


def problem_from_source(source: str, name: str | None = None, origin: str = "<source>") -> Problem:
    """A problem given as text (the MCP ``create_run`` path)."""
    label = name or "problem"
    check_source(source, label)
    return Problem(name=label, source=source, origin=origin)


def spec_path(spec: str) -> tuple[str, str]:
    """A spec's path and its selector (``LEVEL/ID``, or empty)."""
    path_part, _, selector = spec.rpartition(":") if _looks_selected(spec) else (spec, "", "")
    return path_part, selector


def load_problem(spec: str, inside: Callable[[Path], bool] | None = None) -> Problem:
    """Load a problem from any supported spec; errors name the spec and what is wrong. ``inside``
    (a server's roots): a checkout's problem file must resolve where it says yes before it is read."""
    path_part, selector = spec_path(spec)
    path = Path(path_part).expanduser()
    if not path.exists():
        head, colon, tail = spec.rpartition(":")
        if colon and head and Path(head).expanduser().exists():
            raise ProblemError(
                f"{spec}: {head} exists but {tail!r} is not a selector; use LEVEL/ID or LEVEL/NAME, "
                f"e.g. {head}:1/19"
            )
        raise ProblemError(f"no such problem file or directory: {path_part}")
    if path.is_dir():
        if not selector:
            raise ProblemError(f"{spec}: a KernelBench checkout needs LEVEL/ID, e.g. {spec}:1/19")
        return _from_checkout(path, selector, spec, inside)
    if path.suffix == ".jsonl":
        if not selector:
            raise ProblemError(f"{spec}: a JSONL file needs LEVEL/ID or LEVEL/NAME, e.g. {spec}:1/19")
        return _from_jsonl(path, selector, spec)
    if selector:
        raise ProblemError(f"{spec}: a selector only applies to a .jsonl file or a KernelBench checkout")
    source = read_problem_text(path)
    check_source(source, str(path), quote=path.resolve().suffix == ".py")
    return Problem(name=path.stem, source=source, origin=str(path.resolve()))


def read_problem_text(path: Path) -> str:
    """The file's text; a file that is not UTF-8 text is no problem, and nothing of it is shown."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ProblemError(f"{path}: {NOT_A_PROBLEM}") from None
    except OSError as exc:
        raise ProblemError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None


def _looks_selected(spec: str) -> bool:
    head, sep, tail = spec.rpartition(":")
    return bool(sep and head and _SELECTOR.match(tail))


def _parse_selector(selector: str, spec: str) -> tuple[int, str]:
    match = _SELECTOR.match(selector)
    if not match:
        raise ProblemError(f"{spec}: selector must be LEVEL/ID or LEVEL/NAME, got {selector!r}")
    return int(match["level"]), match["key"]


def jsonl_records(path: Path) -> Iterator[tuple[int, int, str, str]]:
    """``(level, problem_id, name, code)`` of every record of a problems JSONL file, unchecked."""
    try:
        yield from _jsonl_rows(path)
    except UnicodeDecodeError:
        raise ProblemError(f"{path}: {NOT_A_PROBLEM}") from None


def _jsonl_rows(path: Path) -> Iterator[tuple[int, int, str, str]]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                yield int(row["level"]), int(row["problem_id"]), str(row["name"]), str(row["code"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                # No detail: int()'s and json's messages quote the line, which may be any file's.
                raise ProblemError(
                    f"{path}:{lineno}: not a problem record {{level, problem_id, name, code}}"
                ) from None


def jsonl_problem(path: Path, level: int, problem_id: int, name: str, code: str, label: str) -> Problem:
    check_source(code, label)
    origin = f"{path.resolve()}:{level}/{problem_id}"
    return Problem(name=name, source=code, origin=origin, level=level, problem_id=problem_id)


def _from_jsonl(path: Path, selector: str, spec: str) -> Problem:
    level, key = _parse_selector(selector, spec)
    for row_level, row_id, name, code in jsonl_records(path):
        if row_level == level and key in (str(row_id), name):
            return jsonl_problem(path, row_level, row_id, name, code, f"{spec} ({name})")
    raise ProblemError(f"{spec}: no problem with level {level} and id or name {key!r} in {path}")


def level_folder(root: Path, level: int) -> Path | None:
    """A checkout's folder of level ``level`` problems (``KernelBench/levelL`` or ``levelL``), if any."""
    candidates = [root / "KernelBench" / f"level{level}", root / f"level{level}"]
    return next((c for c in candidates if c.is_dir()), None)


def checkout_problem(path: Path, level: int) -> Problem:
    """The problem in file ``path`` of a checkout's level folder (named ``ID_Name.py``)."""
    source = read_problem_text(path)
    check_source(source, str(path), quote=path.resolve().suffix == ".py")
    prefix = path.stem.split("_", 1)[0]
    return Problem(
        name=path.stem, source=source, origin=str(path.resolve()), level=level,
        problem_id=int(prefix) if prefix.isdigit() else None,
    )


def _from_checkout(
    root: Path, selector: str, spec: str, inside: Callable[[Path], bool] | None = None
) -> Problem:
    level, key = _parse_selector(selector, spec)
    folder = level_folder(root, level)
    if folder is None:
        raise ProblemError(f"{spec}: {root} has no KernelBench/level{level} folder")
    matches = [
        p for p in sorted(folder.glob("*.py"))
        if p.stem == key or p.stem.split("_", 1)[0] == key
    ]
    if not matches:
        raise ProblemError(f"{spec}: no problem {key!r} in {folder}")
    if inside is not None and not inside(matches[0].resolve()):
        raise ProblemError(f"{spec}: {matches[0]} leads outside the folders this server may use")
    return checkout_problem(matches[0], level)
