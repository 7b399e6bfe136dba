"""CPU checks of the device tooling (tools/gpu_check.py, tools/bench_evaluator.py) and the fixtures.

Device time is scarce, so whatever can fail without a GPU is caught here: the scripts' pure logic,
their dry runs end to end, the junit parsing against a real pytest report, and that every CUDA
fixture candidate parses and defines what the evaluator needs.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "cuda"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"stark_tool_{name}", ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load("bench_evaluator")
gpu_check = _load("gpu_check")


def test_spread_is_range_over_median() -> None:
    assert bench.spread([1.0, 1.02, 0.99]) == pytest.approx(0.03)
    assert bench.spread([2.0, 2.0, 2.0]) == 0.0


def test_agreement_applies_its_target_only_from_50_us() -> None:
    tiny = bench.agreement_row("tiny", 0.012, 0.010)
    assert tiny[3] is None and "under 50 us" in tiny[2]

    close = bench.agreement_row("close", 1.01, 1.0)
    assert close[3] is True and "= 1.010" in close[1]

    # 60 us: the target applies; ours 10% above do_bench fails it.
    off = bench.agreement_row("off", 0.066, 0.060)
    assert off[3] is False and "= 1.100" in off[1]


def test_markdown_table_marks_pass_fail_and_unjudged_rows() -> None:
    text = bench.markdown_table(
        [("a", "1", "< 2", True), ("b", "3", "< 2", False), ("c", "0.01 ms", "(reported)", None)]
    )
    lines = text.splitlines()
    assert lines[0] == "| measurement | value | target | |"
    assert lines[2] == "| a | 1 | < 2 | PASS |"
    assert lines[3] == "| b | 3 | < 2 | FAIL |"
    assert lines[4] == "| c | 0.01 ms | (reported) |  |"


def test_junit_rows_read_a_real_pytest_report(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "def test_good(record_property):\n"
        "    record_property('expected', 'passed')\n"
        "    record_property('got', 'passed/None')\n"
        "    record_property('seconds', 1.5)\n"
        "def test_bad(record_property):\n"
        "    record_property('expected', 'timeout/correctness')\n"
        "    record_property('got', 'passed/None')\n"
        "    assert False, 'verdict differs'\n"
        "@pytest.mark.skip(reason='no device')\n"
        "def test_skipped():\n"
        "    pass\n",
        encoding="utf-8",
    )
    junit = tmp_path / "report.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sample.py",
         f"--junitxml={junit}", "-o", "junit_family=xunit1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["test"]: r for r in gpu_check.junit_rows(junit)}
    assert rows["test_good"]["outcome"] == "passed"
    assert rows["test_good"]["expected"] == "passed" and rows["test_good"]["seconds"] == "1.5"
    assert rows["test_bad"]["outcome"] == "FAILED"
    assert rows["test_bad"]["got"] == "passed/None"
    assert "verdict differs" in rows["test_bad"]["message"]
    assert rows["test_skipped"]["outcome"] == "skipped"
    table = gpu_check.test_table(list(rows.values()))
    assert "| test_bad | timeout/correctness | passed/None | FAILED: " in table


@pytest.mark.slow
def test_gpu_check_dry_run_writes_its_report(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--dry-run", "--skip-tests",
         "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "(c) bench exit 0" in proc.stdout
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"gpu_check.md", "gpu_check.log", "bench_evaluator.json"}
    report = (tmp_path / "gpu_check.md").read_text(encoding="utf-8")
    assert "## Environment" in report and "| jail start-up (median of 5) |" in report
    results = json.loads((tmp_path / "bench_evaluator.json").read_text(encoding="utf-8"))
    [row] = results["rows"]
    assert row[0] == "jail start-up (median of 5)" and float(row[1].split()[0]) > 0


def _load_inline_keywords(path: Path) -> dict[str, ast.expr]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    calls = [n for n in ast.walk(tree)
             if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline"]
    assert len(calls) == 1, f"{path.name}: each candidate builds exactly one extension at import"
    return {k.arg: k.value for k in calls[0].keywords if k.arg is not None}


# Precision cheats written with torch alone need no extension to make their point; nor does the
# memory test's candidate (tests/gpu/test_gpu_memory.py), which is about the regions, not a build.
TORCH_ONLY = {"cand_matmul_tf32_sneaky.py", "cand_matmul_fp16.py", "cand_relu_add_torch.py"}
# Triton candidates launch @triton.jit kernels and build no C++ extension.
TRITON = {p.name for p in FIXTURES.glob("cand_*triton*.py")}


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.py")), ids=lambda p: p.name)
def test_fixture_files_define_what_the_evaluator_needs(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    if path.name.startswith("problem_"):
        assert {"Model", "get_inputs", "get_init_inputs"} <= names
        return
    assert path.name.startswith("cand_")
    assert "ModelNew" in names
    if path.name in TORCH_ONLY:
        assert "load_inline" not in path.read_text(encoding="utf-8")
        return
    if path.name in TRITON:
        text = path.read_text(encoding="utf-8")
        assert "@triton.jit" in text and "load_inline" not in text
        return
    assert {"name", "cpp_sources", "cuda_sources", "functions"} <= set(_load_inline_keywords(path))


def test_extension_names_are_distinct_except_the_collision_pair() -> None:
    names = {p.name: ast.literal_eval(_load_inline_keywords(p)["name"])
             for p in FIXTURES.glob("cand_*.py") if p.name not in TORCH_ONLY | TRITON}
    pair = {k: v for k, v in names.items() if "collide" in k}
    others = [v for k, v in names.items() if "collide" not in k]
    assert len(pair) == 2 and set(pair.values()) == {"stark_fx_collide"}
    assert len(others) == len(set(others)) and "stark_fx_collide" not in others


def test_run_streamed_echoes_output_and_interrupts_at_the_deadline() -> None:
    out = gpu_check.Transcript()
    rc, _ = gpu_check.run_streamed(out, [sys.executable, "-c", "print('hello from child')"], timeout_s=60)
    assert rc == 0 and "  | hello from child" in out.text()

    # The child announces itself, then would sleep far past the deadline; SIGINT must end it.
    script = "import time; print('started', flush=True); time.sleep(120)"
    rc, seconds = gpu_check.run_streamed(out, [sys.executable, "-c", script], timeout_s=3)
    assert rc is None
    assert seconds < 3 + gpu_check.GRACE_S
    assert "TIMEOUT after 3s" in out.text() and "still running" not in out.text()


def test_pipeline_dry_run_checks_its_candidates() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_evaluator.py"), "--dry-run", "--pipeline"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    row = "| pipeline candidates (distinct sources, extension names) | 9, 9 of 9 | all distinct | PASS |"
    assert row in proc.stdout
    rows: list = []
    bench.pipeline_dry_run(rows)
    assert rows[0][3] is True and len(set(bench.pipeline_candidates(8))) == 8


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_bench_builds_dry_run_classifies_both_layouts() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_builds.py"), "--dry-run"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| torch_header | " in proc.stdout and " | torch_headers | " in proc.stdout
    assert "| fast_layout | " in proc.stdout and " | fast | " in proc.stdout
    assert "dry run ok" in proc.stdout
    builds = _load("bench_builds")
    module = builds.candidate_module(builds.CANDIDATES["fast_layout"]["spec"], "_x", "tag")
    assert "# tag" in module and "'bench_softplus_x'" in module
    ast.parse(module)
