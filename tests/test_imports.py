"""Every module of the package imports, so a module moved without its importers fails here and not
on a user's machine (many are imported only by a subprocess, a lazy ``__getattr__`` or an adapter no
other test starts). The walk runs in a fresh interpreter: importing a worker's or a jail's entry
module must not touch this test process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Imports every module under a package; prints the count and each failure. Optional extras are
# blocked first (``sys.modules[name] = None`` makes their import fail), so a module that needs one
# at import time fails too: the ``ray`` extra is imported only where ``--executor ray`` runs
# (evaluator/host/ray_executor.py), and a base install must import everything.
WALK = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys
    for extra in ("ray",):
        sys.modules[extra] = None
    name = sys.argv[1]
    package = importlib.import_module(name)
    failed = {}
    def record(module):
        failed[module] = repr(sys.exc_info()[1])
    count = 0
    for info in pkgutil.walk_packages(package.__path__, name + ".", onerror=record):
        count += 1
        try:
            importlib.import_module(info.name)
        except BaseException as exc:
            failed[info.name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"count": count, "failed": failed}))
    """
)


def walk(package: str, path: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", WALK, package], cwd=path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_every_module_of_the_package_imports() -> None:
    found = walk("stark_mcp", ROOT)
    assert found["count"] > 200  # the walk went into the subpackages
    assert found["failed"] == {}


def test_the_walk_sees_a_broken_import(tmp_path: Path) -> None:
    package = tmp_path / "moved_away"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "fine.py").write_text("import json\n")
    (package / "inner" / "__init__.py").write_text("")
    (package / "inner" / "stale.py").write_text("from moved_away.gone import thing\n")
    (package / "needs_ray.py").write_text("import ray\n")
    found = walk("moved_away", tmp_path)
    assert found["count"] == 4
    assert set(found["failed"]) == {"moved_away.inner.stale", "moved_away.needs_ray"}


# Names the scripts under tools/ import from the package, resolved without running the scripts
# (most need a GPU or run for minutes): tools/cpu_timing_noise.py kept importing ``assemble`` from
# the evaluator for a whole merge after the parent side moved into evaluator/host/.
RESOLVE = textwrap.dedent(
    """
    import ast, importlib, json, sys
    missing = []
    for path in sys.argv[1:]:
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            names = []
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            if isinstance(node, ast.ImportFrom) and node.level == 0 and module.startswith("stark_mcp"):
                names = [(module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                names = [(a.name, None) for a in node.names if a.name.startswith("stark_mcp")]
            for module, name in names:
                try:
                    found = importlib.import_module(module)
                    if name is not None and not hasattr(found, name):
                        importlib.import_module(f"{module}.{name}")
                except Exception as exc:
                    missing.append(f"{path}:{node.lineno}: {module} {name or ''}: {type(exc).__name__}")
    print(json.dumps(missing))
    """
)


def unresolved(paths: list[Path], cwd: Path) -> list[str]:
    argv = [sys.executable, "-c", RESOLVE, *map(str, paths)]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_every_name_the_tools_import_from_the_package_exists() -> None:
    tools = sorted((ROOT / "tools").glob("*.py"))
    assert len(tools) > 10
    assert unresolved(tools, ROOT) == []


def test_the_tools_check_sees_a_moved_name(tmp_path: Path) -> None:
    script = tmp_path / "old_tool.py"
    script.write_text("from stark_mcp.evaluator import Evaluator, assemble\nimport stark_mcp.moved_away\n")
    found = unresolved([script], ROOT)
    assert len(found) == 2 and "assemble" in found[0] and "moved_away" in found[1]
