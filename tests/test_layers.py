"""The house rules a reviewer would otherwise check by hand: one door for the adapters, one place
that reads the environment. Read from the source with ``ast``, so a function-level import counts."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "stark_mcp"
ADAPTERS = ("cli", "server")
# Below RunService: the adapters may catch these layers' exceptions (each layer's ``errors`` module,
# mapped to CLI messages and MCP errors at the boundary), and use nothing else of them.
BEHIND_THE_DOOR = ("stark_mcp.store", "stark_mcp.evaluator", "stark_mcp.tree")
SERVICE_INTERNALS = {"store", "evaluator", "trees", "_store", "_evaluator"}
VARIABLE = re.compile(r"STARK_[A-Z][A-Z_]*")


def modules(*folders: str) -> Iterator[tuple[Path, ast.Module]]:
    for folder in folders:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def behind_the_door(module: str) -> bool:
    inside = any(module == layer or module.startswith(layer + ".") for layer in BEHIND_THE_DOOR)
    return inside and not module.endswith(".errors") and not any(
        module.startswith(layer + ".errors.") for layer in BEHIND_THE_DOOR
    )


def test_the_adapters_reach_store_evaluator_and_tree_only_through_the_run_service() -> None:
    crossings = []
    for path, tree in modules(*ADAPTERS):
        where = path.relative_to(PACKAGE.parent)
        for line, module in imported(tree):
            # ``from stark_mcp.store.errors import NotFound`` names the module, then the class.
            if behind_the_door(module):
                crossings.append(f"{where}:{line} imports {module}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in SERVICE_INTERNALS:
                crossings.append(f"{where}:{node.lineno} reaches .{node.attr}")
    assert crossings == []


@pytest.mark.parametrize("module", ["stark_mcp.store", "stark_mcp.tree.structure", "stark_mcp.evaluator"])
def test_the_door_check_sees_a_crossing(module: str) -> None:
    assert behind_the_door(module)
    assert not behind_the_door("stark_mcp.store.errors")
    assert not behind_the_door("stark_mcp.orchestrator.reads")


# Names that look like variables but are no setting of stark-mcp's processes.
NOT_SETTINGS = {
    "STARK_IMPORT_ROOTS": "a problem file's constant (problems/declarations.py)",
    "STARK_TARGET": "a problem file's constant (problems/declarations.py)",
    "STARK_EVIDENCE": "an exported kernel's evidence block (orchestrator/verify.py)",
    "STARK_CAPTURE": "read by stark_mcp.capture in the user's own program (usercode/__init__.py)",
}


def test_only_config_names_a_stark_variable() -> None:
    # A string that is exactly a variable name (or the STARK_MODEL_ prefix) is how code reads one;
    # prose that mentions a variable (help texts, docstrings) is longer and does not count.
    readers = []
    for path, tree in modules("."):
        if path == PACKAGE / "config.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value,
                str) and VARIABLE.fullmatch(node.value) and node.value not in NOT_SETTINGS:
                readers.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.value}")
    assert readers == []


def test_every_documented_variable_is_a_setting() -> None:
    from stark_mcp.config import ROLE_MODEL_PREFIX, VARIABLES

    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`(STARK_[A-Z_]+?)(?:<ROLE>)?`", readme))
    known = set(VARIABLES.values()) | {ROLE_MODEL_PREFIX}
    assert documented == known


def test_only_python_ast_parses_python_source() -> None:
    # ast.parse can fail on valid source while another thread parses (python_ast.py says why).
    callers = []
    for path, tree in modules("."):
        if path == PACKAGE / "python_ast.py":
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr == "parse" and isinstance(node.value, ast.Name)
                    and node.value.id == "ast"):
                callers.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert callers == []


# The evaluator's process side: what runs in jails, in the trusted worker, and what they share. They
# run where the parent's dependencies are not installed (a bare machine's torch) and must never
# reach back into the parent side, whose code a candidate's verdict would then depend on.
BOUNDARY = ("trusted", "untrusted", "sandbox", "common", "buildkit", "reference")
# Optional, imported only where present (under ``suppress(ImportError)``): numpy, to seed a problem's
# own NumPy generator (reference/problem_code.py); triton, which torch ships and a spare runner
# imports ahead of the candidates that use it (untrusted/runner.py).
ALLOWED_THIRD_PARTY = {"torch", "numpy", "triton"}


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """A relative import's module as an absolute name (``from ..x import y`` in a/b/c.py: a.x)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    base = parts[: len(parts) - node.level]
    return ".".join(base + ([node.module] if node.module else []))


def boundary_imports() -> Iterator[tuple[Path, int, str]]:
    folders = [f"evaluator/{name}" for name in BOUNDARY]
    for path, tree in modules(*folders):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield from ((path, node.lineno, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(path, node) if node.level else str(node.module)
                if module.startswith("buildkit."):  # compile_main.py runs as a script beside buildkit/
                    module = "stark_mcp.evaluator." + module
                yield path, node.lineno, module


def crosses_the_boundary(module: str) -> bool:
    import sys

    root = module.split(".")[0]
    if root == "stark_mcp":
        return not any(
            module == f"stark_mcp.evaluator.{name}" or module.startswith(f"stark_mcp.evaluator.{name}.")
            for name in BOUNDARY
        )
    return root not in sys.stdlib_module_names and root not in ALLOWED_THIRD_PARTY and root != "__future__"


def test_the_evaluators_process_side_imports_only_itself_the_standard_library_and_torch() -> None:
    found = list(boundary_imports())
    assert len(found) > 100  # the walk saw the folders
    crossings = [f"{p.relative_to(PACKAGE)}:{n} imports {m}" for p, n, m in found if crosses_the_boundary(m)]
    assert not crossings, "\n".join(crossings)


@pytest.mark.parametrize(
    "module",
    [
        "stark_mcp.evaluator.host.service",
        "stark_mcp.evaluator.host",
        "stark_mcp.records",
        "pydantic",
        "stark_mcp.evaluator.host.profile_reports",
        "stark_mcp.evaluator",
        "stark_mcp.evaluator.errors",
    ],
)
def test_the_boundary_check_sees_a_crossing(module: str) -> None:
    assert crosses_the_boundary(module)
    assert not crosses_the_boundary("stark_mcp.evaluator.common.frames")
    assert not crosses_the_boundary("torch.cuda") and not crosses_the_boundary("json")
