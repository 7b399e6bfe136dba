"""Every GPU case of the adversarial suite on a CUDA device (skipped without one): its expected verdict,
no crash, no blame on the problem. tools/gpu_check.py runs this and prints the table that goes into
docs/benchmarks/adversarial.md; each test records expected, got, speedup and the figures of its trust
report as junit properties."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.problems import load_problem
from tests.adversarial import cases
from tests.timing_bounds import honest_timing_problem
from tests.toolchain import shared_toolchain

GPU_CASES = cases.load(cases.HERE / "gpu")
SETTINGS = EvalSettings(
    baselines=("eager",),
    trials=3,
    max_time_s=1.0,
    correctness_timeout_s=60.0,
    timing_timeout_s=120.0,
    load_timeout_s=60.0,
    build_timeout_s=300.0,
    profile=False,
    sanitize=False,
)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.anyio,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
async def gpu_evaluator(tmp_path_factory):
    cache = tmp_path_factory.mktemp("stark-gpu-adversarial")
    async with Evaluator(cache, SETTINGS, toolchain_dir=shared_toolchain()) as ev:
        yield ev


@pytest.mark.parametrize("case", GPU_CASES, ids=[c.name for c in GPU_CASES])
async def test_gpu_case(gpu_evaluator, case: cases.Case, record_property) -> None:
    problem = load_problem(str(cases.HERE / "problems" / f"{case.problem}.py"))
    record_property("class", case.klass)
    record_property("expected", " | ".join(map(str, case.expect)))
    t0 = time.monotonic()
    evaluation = await gpu_evaluator.evaluate(
        problem, case.source, device="cuda", settings=SETTINGS, use_cache=False
    )
    ok, seen = cases.judge(case, evaluation)
    record_property("got", seen)
    record_property("wall_s", round(time.monotonic() - t0, 1))
    if evaluation.runtime is not None:
        record_property("median_ms", round(evaluation.runtime.median_ms, 5))
    trust = evaluation.trust
    if trust is not None:
        record_property(
            "trust",
            f"{trust.isolation}; checked {trust.checked_calls}/{trust.calls} "
            f"(timed {trust.timed_checked}/{trust.timed_calls}); reported "
            f"{trust.reported_ms and round(trust.reported_ms, 4)} ms, trusted "
            f"{trust.external_ms and round(trust.external_ms, 4)} ms",
        )
    assert ok, (
        f"{case.name}: expected {' | '.join(map(str, case.expect))}, got {seen}: {evaluation.message[:400]}"
    )


async def test_a_launch_bound_honest_report_agrees_with_the_trusted_clock_on_a_loaded_cpu(
    gpu_evaluator, record_property
) -> None:
    # The honest launch-bound control while every core spins (as when builds, or another
    # evaluator, run beside a timing): the trusted bracket then holds scheduling delays the
    # candidate's events do not, and an honest report must still not read as forged or mismatched.
    problem = load_problem(str(cases.HERE / "problems" / "gpu_relu_add_tiny.py"))
    source = (cases.HERE / "gpu" / "gpu_honest_launch_bound.py").read_text()
    spin = "import time\nt = time.monotonic() + 600\nwhile time.monotonic() < t:\n    pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 2)]
    try:
        evaluation = await gpu_evaluator.evaluate(
            problem, source, device="cuda", settings=SETTINGS, use_cache=False
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    findings = evaluation.trust.findings if evaluation.trust else []
    mismatch = [f for f in findings if "timing_mismatch" in f]
    record_property("expected", "passed, no timing_mismatch")
    record_property(
        "got",
        f"{evaluation.status.value} {evaluation.speedups.get('eager', 0):.2f}x; "
        + ("; ".join(f[:200] for f in mismatch) if mismatch else "report within the trusted slack"),
    )
    assert evaluation.status.value == "passed", evaluation.message
    assert honest_timing_problem(evaluation) is None, mismatch
