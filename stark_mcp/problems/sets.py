"""Every problem of a collection: a KernelBench checkout, a problems JSONL file, or a folder of files.

Each problem is checked statically as it is read (see ``loading.check_source``), so a broken
entry is reported with its file or line before any work starts. ``problem_key`` names a problem
inside its collection: ``LEVEL/ID`` when both are known, else its name.
"""

from __future__ import annotations

import re
from pathlib import Path

from stark_mcp.problems.errors import ProblemError
from stark_mcp.problems.loading import (
    check_source,
    checkout_problem,
    jsonl_problem,
    jsonl_records,
    level_folder,
)
from stark_mcp.problems.problem import Problem

_LEVEL_DIR = re.compile(r"^level(\d+)$")


def problem_key(problem: Problem) -> str:
    if problem.level is not None and problem.problem_id is not None:
        return f"{problem.level}/{problem.problem_id}"
    return problem.name


def load_problem_set(path: str | Path) -> list[Problem]:
    """The problems in ``path``, in collection order (level, then id; files by name)."""
    root = Path(path).expanduser()
    if not root.exists():
        raise ProblemError(f"no such problem collection: {path}")
    if root.is_file():
        if root.suffix == ".jsonl":
            problems = [
                jsonl_problem(root, level, pid, name, code, f"{root} ({level}/{pid} {name})")
                for level, pid, name, code in jsonl_records(root)
            ]
        elif root.suffix == ".py":
            problems = [_file_problem(root)]
        else:
            raise ProblemError(
                f"{path}: expected a .jsonl file, a .py file, a KernelBench checkout or a folder"
            )
    else:
        levels = _checkout_levels(root)
        if levels:
            problems = [
                checkout_problem(file, level) for level in levels for file in _level_files(root, level)
            ]
        else:
            problems = [
                _file_problem(file) for file in sorted(root.glob("*.py")) if not file.name.startswith("_")
            ]
    if not problems:
        raise ProblemError(f"{path} holds no problems")
    _check_unique(problems, str(path))
    return problems


def _checkout_levels(root: Path) -> list[int]:
    folders = [root / "KernelBench", root]
    found = {
        int(m.group(1))
        for folder in folders
        if folder.is_dir()
        for child in folder.iterdir()
        if child.is_dir() and (m := _LEVEL_DIR.match(child.name))
    }
    return sorted(level for level in found if level_folder(root, level) is not None)


def _level_files(root: Path, level: int) -> list[Path]:
    folder = level_folder(root, level)
    assert folder is not None  # listed by _checkout_levels
    files = [f for f in folder.glob("*.py") if not f.name.startswith("_")]

    def order(file: Path) -> tuple[int, str]:
        prefix = file.stem.split("_", 1)[0]
        return (int(prefix) if prefix.isdigit() else 1 << 30, file.stem)

    return sorted(files, key=order)


def _file_problem(path: Path) -> Problem:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"cannot read {path}: {exc}") from None
    check_source(source, str(path))
    return Problem(name=path.stem, source=source, origin=str(path.resolve()))


def _check_unique(problems: list[Problem], label: str) -> None:
    seen: dict[str, Problem] = {}
    for problem in problems:
        key = problem_key(problem)
        if key in seen:
            raise ProblemError(
                f"{label}: two problems share the key {key} ({seen[key].origin} and {problem.origin})"
            )
        seen[key] = problem
