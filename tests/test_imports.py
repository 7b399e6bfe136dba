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
