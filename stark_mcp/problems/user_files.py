"""Which of the user's own files a problem (and a candidate) runs, and their digests (parent side).

A problem made from the user's code imports it from ``STARK_IMPORT_ROOTS``; its verdicts and times
depend on those files as much as on the problem's text, so every cache keyed by the problem also
keys on their digests (``evaluator/host/verdict_dependencies.py``). The files are found the way
Python's import system would find them under the roots, statically: every ``import`` and ``from ... import``
anywhere in a text (in functions too), resolved against the roots in order (the first root holding
the top-level name wins, as on ``sys.path``); each package on the way contributes its
``__init__.py``; ``from pkg import name`` counts ``pkg/name.py`` when it exists (a submodule);
relative imports in a file under a root resolve against its package. Files found are read in turn
the same way, so the closure stays under the roots; imports that resolve outside them (torch, the
standard library) are not followed. Imports by string (``importlib.import_module(name)``) are not
seen: a module loaded only that way is not part of the key.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

from stark_mcp import python_ast

MAX_FILES = 5000  # a pathological tree stops here: the key then covers the files found so far


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _imported(tree: ast.AST, package: list[str] | None) -> list[str]:
    """Dotted module names ``tree`` imports; relative ones resolved against ``package`` (the
    importing file's package, None for a file outside the roots: its relative imports are left out)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None or node.level - 1 > len(package):
                    continue
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            else:
                module = node.module or ""
            if module:
                names.append(module)
            names += [f"{module}.{alias.name}".strip(".") for alias in node.names if alias.name != "*"]
    return names


def _resolve(module: str, roots: list[Path]) -> list[Path]:
    """The files importing ``module`` runs from the first root that holds its top-level name:
    the ``__init__.py`` of each package on the way and the module's own file."""
    parts = module.split(".")
    for root in roots:
        top = root / parts[0]
        if not (top.is_dir() or top.with_suffix(".py").is_file()):
            continue
        found: list[Path] = []
        here = root
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            folder, file = here / part, here / f"{part}.py"
            if folder.is_dir():
                init = folder / "__init__.py"
                if init.is_file():
                    found.append(init)
                here = folder
                continue
            if file.is_file() and (last or not folder.exists()):
                found.append(file)
            break  # a module's attribute, or nothing more under this root
        return found
    return []


def _package_of(path: Path, roots: list[Path]) -> list[str] | None:
    for root in roots:
        try:
            rel = path.relative_to(root)
        except ValueError:
            continue
        parts = list(rel.parts[:-1])
        return parts  # __init__.py's package is its own folder; a module's is its folder too
    return None


def user_files(roots: Iterable[str], texts: Iterable[str | ast.Module]) -> dict[str, str]:
    """Label (the file's path under its root, e.g. ``mylib/layers.py``) -> digest of every file under
    ``roots`` that ``texts`` import, directly or through each other. A text may come parsed already
    (a candidate's one parse)."""
    root_paths = [Path(r) for r in roots]
    if not root_paths:
        return {}
    queue: list[Path] = []
    for text in texts:
        try:
            tree = text if isinstance(text, ast.Module) else python_ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for module in _imported(tree, None):
            queue += _resolve(module, root_paths)
    seen: dict[Path, str] = {}
    while queue and len(seen) < MAX_FILES:
        path = queue.pop()
        if path in seen:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            seen[path] = "unreadable"
            continue
        seen[path] = digest_bytes(data)
        try:
            tree = python_ast.parse(data.decode("utf-8", "replace"))
        except (SyntaxError, ValueError):
            continue
        for module in _imported(tree, _package_of(path, root_paths)):
            queue += _resolve(module, root_paths)
    return {_label(path, root_paths): digest for path, digest in sorted(seen.items())}


def _label(path: Path, roots: list[Path]) -> str:
    for root in roots:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            continue
    return str(path)
