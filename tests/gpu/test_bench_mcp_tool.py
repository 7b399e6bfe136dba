"""CPU checks of tools/bench_mcp.py (issue 13's table through the MCP server) and its candidates.

The benchmark itself needs a GPU; here: its pure logic, the KernelBench problems it reads from
../shared, every candidate in tools/candidates (parses, defines ModelNew, builds what a candidate of
its language builds, and the Triton ones compute the right thing in Triton's interpreter when Triton
is installed), and its dry run end to end: a real `stark-mcp serve` over stdio on a CPU problem.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELBENCH = ROOT.parent / "shared" / "kernelbench" / "problems.jsonl"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stark_tool_bench_mcp", ROOT / "tools" / "bench_mcp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_fixed_cost_leaves_out_the_candidates_own_work_and_the_profile() -> None:
    phases = {"build": 0.1, "load": 0.3, "correctness": 0.5, "timing": 3.0, "profile": 6.0}
    work, profile, fixed = bench.fixed_cost(10.4, phases)
    assert (work, profile) == (3.5, 6.0) and fixed == pytest.approx(0.9)
    assert bench.fixed_cost(2.0, {}) == (0.0, 0.0, 2.0)


def test_again_changes_the_source_hash_and_not_the_kernels() -> None:
    from stark_mcp.problems import source_hash

    source = bench.candidate_source("gelu_tanh", "cuda")
    repeated = bench.again(source)
    assert source_hash(repeated) != source_hash(source)
    assert repeated.startswith(source)
    ast.parse(repeated)


@pytest.mark.skipif(not KERNELBENCH.exists(), reason="../shared/kernelbench is not beside this checkout")
def test_the_three_problems_come_from_kernelbench_and_missing_ones_are_named(tmp_path: Path) -> None:
    codes = bench.kernelbench_codes(KERNELBENCH, list(bench.PROBLEMS))
    assert list(codes) == ["L1 88", "L2 18", "L1 23"]
    for code in codes.values():
        names = {n.name for n in ast.parse(code).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= names
    one = tmp_path / "one.jsonl"
    one.write_text(KERNELBENCH.read_text().splitlines()[0] + "\n")
    with pytest.raises(SystemExit, match="no problem for L1 23, L1 88, L2 18"):
        bench.kernelbench_codes(one, list(bench.PROBLEMS))


CANDIDATES = sorted((ROOT / "tools" / "candidates").glob("*.py"))


def test_every_problem_has_a_candidate_in_each_language() -> None:
    names = {p.stem for p in CANDIDATES}
    assert names == {f"{stem}_{lang}" for *_, stem in bench.PROBLEMS.values() for lang in bench.LANGUAGES}


@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: p.name)
def test_candidates_define_model_new_and_build_what_their_language_builds(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    assert "ModelNew" in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    loads = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline"
    ]
    if path.stem.endswith("_cuda"):
        # what models usually write: torch headers in the .cu source and functions= bindings
        assert len(loads) == 1 and "#include <torch/extension.h>" in text
        keywords = {k.arg for k in loads[0].keywords}
        assert {"cuda_sources", "functions"} <= keywords and "no_implicit_headers" not in keywords
    else:
        assert not loads and "@triton.jit" in text


TRITON_CHECK = r"""
import importlib.util, json, math, os, sys
import torch

def load(path):
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

folder = sys.argv[1]
errors = {}
x = torch.randn(3, 5000) * 4
ref = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
errors["gelu_tanh"] = (load(folder + "/gelu_tanh_triton.py").ModelNew()(x) - ref).abs().max().item()
torch.manual_seed(1)
new = load(folder + "/linear_rowsum_triton.py").ModelNew(300, 200)
torch.manual_seed(1)
linear = torch.nn.Linear(300, 200)
x = torch.rand(7, 300)
ref = linear(x).sum(dim=1, keepdim=True)  # the max, mean and logsumexps over one value keep it
errors["linear_rowsum"] = (new(x) - ref).abs().max().item() / ref.abs().max().item()
x = torch.rand(3, 9000)  # not a multiple of the block: the padded lanes are exercised
softmax = load(folder + "/softmax_rows_triton.py").ModelNew()
errors["softmax_rows"] = (softmax(x) - torch.softmax(x, 1)).abs().max().item()
print(json.dumps(errors))
"""


def test_triton_candidates_compute_the_reference_in_the_interpreter() -> None:
    pytest.importorskip("triton", reason="Triton is not installed (it comes with CUDA builds of torch)")
    proc = subprocess.run(
        [sys.executable, "-c", TRITON_CHECK, str(ROOT / "tools" / "candidates")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert errors["gelu_tanh"] < 1e-5 and errors["linear_rowsum"] < 1e-5, errors
    assert errors["softmax_rows"] < 1e-6, errors


@pytest.mark.slow
def test_dry_run_drives_a_real_server_over_stdio(tmp_path: Path) -> None:
    out = tmp_path / "bench_mcp.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_mcp.py"), "--dry-run", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    results = json.loads(out.read_text())
    dry = results["problems"]["dry"]
    assert dry["create_cold_s"] > 0 and dry["create_warm_s"] < dry["create_cold_s"], proc.stdout[-2000:]
    for step in ("cold", "again"):
        entry = dry["cpp"][step]
        assert entry["status"] == "passed", entry
        assert entry["phases"]["timing"] > 0 and entry["work_s"] > 0
    assert dry["cpp"]["plain"]["ok"] is True
    assert results["non_blocking"]["pending"] == ["compile_default", "compile_max_autotune"]
    rows = {row[0]: row for row in results["rows"]}
    assert rows["dry: create_run, same problem again"][3] is True
    assert "| create_run with every baseline, cold (compile modes pending) |" in proc.stdout
