#!/usr/bin/env python3
"""The own-module flow on a CUDA device, in one call: problem from a user package, evaluations, drop-in.

    python3 tools/own_module_gpu.py            # on a GPU box, about 2 minutes
    python3 tools/own_module_gpu.py --device cpu   # the same on the CPU, as a dry run

Steps (each printed as it goes):
  (a) copy the test user package (tests/fixtures/userpkg) to a temporary project and make a problem
      from mylib.layers:ScaledMLP with two input sets, run once on the device by the evaluator;
  (b) evaluate three candidates (tests/server/fixtures/own_module): a correct addmm rewrite, one
      that drops the scale (wrong everywhere), one tuned to the first input set only (must fail: the
      evaluator judges every set); a table: candidate, expected, got, runtime, speedup, per set;
  (c) export the correct one as a drop-in module into the project, then, in a fresh process, swap
      it into the user's Encoder on the device, compare outputs with the original's, and run its
      self-check.
Exit status 0 when every row matches its expectation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stark_mcp.evaluator import EvalSettings, Evaluator  # noqa: E402
from stark_mcp.orchestrator.dropin_export import dropin_source  # noqa: E402
from stark_mcp.orchestrator.own_module import create_problem, problem_request  # noqa: E402
from stark_mcp.problems import load_problem  # noqa: E402
from stark_mcp.records import Action, Node  # noqa: E402

CANDIDATES = ROOT / "tests" / "server" / "fixtures" / "own_module"
EXPECTED = {
    "cand_mlp_addmm": "passed",
    "cand_mlp_noscale": "wrong_output",
    "cand_mlp_overfit": "wrong_output",
}
USE_ON_DEVICE = """
import json, sys, torch, stark_mcp
from mylib import fast_mlp
from mylib.layers import Encoder
device = sys.argv[1]
torch.manual_seed(3)
model = Encoder(32, 64).eval().to(device)
x = torch.randn(8, 16, 32, device=device)
with torch.no_grad():
    before = model(x)
stark_mcp.swap(model, "mlp", fast_mlp.ModelNew)
with torch.no_grad():
    after = model(x)
diff = float((after - before).abs().max())
print(json.dumps({"max_abs_diff": diff, "self_check": fast_mlp._stark_self_check()}))
"""


async def main(device: str, keep: bool) -> int:
    work = Path(tempfile.mkdtemp(prefix="stark-own-module-"))
    project = work / "proj"
    shutil.copytree(ROOT / "tests" / "fixtures" / "userpkg", project)
    ok = True
    settings = EvalSettings(baselines=("eager",))
    async with Evaluator(work / "cache", settings) as evaluator:
        print(f"(a) problem from mylib.layers:ScaledMLP on {device}", flush=True)
        request = problem_request(
            target="mylib.layers:ScaledMLP",
            project_root=str(project),
            init_args=[32, 64],
            init_kwargs={"scale": 0.5},
            inputs=["x:float32[batch,seq,32]"],
            shapes=[{"batch": 2, "seq": 4}, {"batch": 8, "seq": 16}],
        )
        created = await create_problem(request, evaluator, device=device)
        print(f"    wrote {created.path}, ran once on {created.checked_on}; sets {list(created.shapes)}")
        problem = load_problem(created.path)
        print("(b) candidates", flush=True)
        print("| candidate | expected | got | runtime ms | eager speedup | per input set |")
        print("|---|---|---|---|---|---|")
        passed: Node | None = None
        for name, expected in EXPECTED.items():
            source = (CANDIDATES / f"{name}.py").read_text()
            evaluation = await evaluator.evaluate(problem, source, device=device, use_cache=False)
            runtime = f"{evaluation.runtime.median_ms:.4f}" if evaluation.runtime else "-"
            speedup = f"{evaluation.speedups['eager']:.2f}x" if "eager" in evaluation.speedups else "-"
            per_set = "; ".join(
                f"{s.label} {s.speedups.get('eager', float('nan')):.2f}x" for s in evaluation.shapes
            )
            got = evaluation.status.value
            mark = "" if got == expected else " MISMATCH"
            ok &= got == expected
            shown = per_set or "(not reported)"
            print(f"| {name} | {expected} | {got}{mark} | {runtime} | {speedup} | {shown} |")
            if name == "cand_mlp_addmm" and evaluation.passed:
                passed = Node(
                    id="n1", run_id="r-gpu000", action=Action.PLAN, source=source, evaluation=evaluation
                )
    print("(c) drop-in export, swapped into Encoder", flush=True)
    if passed is None:
        print("    no correct candidate to export")
        return 1
    (project / "src" / "mylib" / "fast_mlp.py").write_text(dropin_source(problem, passed))
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    with anyio.fail_after(300):
        done = await anyio.run_process([sys.executable, "-c", USE_ON_DEVICE, device], env=env, check=False)
    if done.returncode != 0:
        print(done.stderr.decode()[-3000:])
        return 1
    lines = done.stdout.decode().strip().splitlines()
    report = json.loads(lines[-1])
    print("\n".join(f"    {line}" for line in lines[:-1]))
    print(f"    max |after - before| = {report['max_abs_diff']:.3e}; self-check exit {report['self_check']}")
    ok &= report["max_abs_diff"] < 1e-3 and report["self_check"] == 0
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"    kept {work}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary project")
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.device, args.keep)))
