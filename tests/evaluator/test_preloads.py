"""What a forked reference jail inherits from the zygote: its problem imports none of torch's modules.

Every jail forked from a zygote starts with what the zygote imported (``zygote.PRELOAD``); a module
first imported by a reference jail is imported again by every one, one per problem loaded."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.evaluator.conftest import FIXTURES

# A fresh interpreter stands for the zygote: the same imports, then one problem loaded as a reference
# jail loads it (its model built, its inputs sized on the meta device, then made).
LOAD_AFTER_PRELOADS = """
import importlib, json, sys
from stark_mcp.evaluator.sandbox.zygote import PRELOAD
for name in PRELOAD:
    importlib.import_module(name)
from stark_mcp.evaluator.reference.problem_code import ProblemCode
before = set(sys.modules)
problem = ProblemCode(sys.argv[1], "stark_problem_k", "cpu")
problem.load(1)
assert problem.planned_input_bytes(2) > 0, "the inputs were not sized on the meta device"
problem.probe(0, (3, 4))
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_a_reference_jails_problem_imports_nothing_of_torchs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AFTER_PRELOADS, str(FIXTURES / "relu_sum.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    new = json.loads(done.stdout.strip().splitlines()[-1])
    heavy = [name for name in new if name.split(".")[0] in ("torch", "sympy", "mpmath", "numpy")]
    # torch.utils._device is the meta device's context manager: one small module
    assert [name for name in heavy if name != "torch.utils._device"] == [], heavy
