"""Run a problem file the way the evaluator does, outside it, and print what it did as JSON.

``python run_problem.py PROBLEM.py [CHANGE]``: builds Model from get_init_inputs(), runs it
on get_inputs(**shape) for each entry of SHAPES (or once), and reports per input set the
argument and output shapes; plus whether Model is the problem's STARK_TARGET class and
its state_dict keys. With CHANGE (a file), it then appends a comment to that file, imports
the problem again and reports the error it raises. A subprocess, so the user's package never
enters the test process.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys

import torch


def load(path: str):
    spec = importlib.util.spec_from_file_location("problem_under_test", path)
    assert spec is not None and spec.loader is not None
    problem = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(problem)
    return problem


def main() -> None:
    problem = load(sys.argv[1])
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs())
    module_name, _, qualname = problem.STARK_TARGET.partition(":")
    target = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    report = {
        "is_target": isinstance(target, type) and isinstance(model, target),
        "training": model.training,
        "state_dict": sorted(model.state_dict()),
        "dtypes": sorted({str(p.dtype) for p in model.parameters()}),
        "sets": {},
    }
    for shape in getattr(problem, "SHAPES", None) or [{}]:
        inputs = problem.get_inputs(**shape)
        with torch.no_grad():
            out = model(*inputs)
        label = ",".join(f"{k}={v}" for k, v in shape.items()) or "default"
        report["sets"][label] = {
            "args": [list(x.shape) if isinstance(x, torch.Tensor) else repr(x) for x in inputs],
            "out": list(out.shape),
            "finite": bool(torch.isfinite(out).all()),
        }
    if len(sys.argv) > 2:
        with open(sys.argv[2], "a") as handle:
            handle.write("# edited\n")
        try:
            load(sys.argv[1])
            report["after_change"] = None
        except Exception as exc:  # noqa: BLE001 - the report says what the problem raised
            report["after_change"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(report))


if __name__ == "__main__":
    main()
