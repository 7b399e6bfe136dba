"""What a forked worker inherits from the zygote: its first problem imports none of torch's modules.

Every worker forked from a zygote starts with what the zygote imported (``zygote.PRELOAD``); a module
first imported by the worker is imported again by every worker, each time a worker is replaced."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.evaluator.conftest import FIXTURES

# A fresh interpreter stands for the zygote: the same imports, then one problem loaded as a worker
# loads it (its model built, its inputs sized on the meta device, then made).
LOAD_AFTER_PRELOADS = """
import importlib, json, sys
from stark_mcp.evaluator.sandbox.zygote import PRELOAD
for name in PRELOAD:
    importlib.import_module(name)
from stark_mcp.evaluator.trusted.problem import LoadedProblem
before = set(sys.modules)
problem = LoadedProblem("k", "relu_sum", sys.argv[1], "cpu")
problem.load()
assert problem.planned_input_bytes > 0, "the inputs were not sized on the meta device"
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_a_workers_first_problem_imports_nothing_of_torchs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AFTER_PRELOADS, str(FIXTURES / "relu_sum.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    new = json.loads(done.stdout.strip().splitlines()[-1])
    heavy = [name for name in new if name.split(".")[0] in ("torch", "sympy", "mpmath", "numpy")]
    # torch.utils._device is the meta device's context manager: one small module
    assert [name for name in heavy if name != "torch.utils._device"] == [], heavy
