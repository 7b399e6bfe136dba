"""Every GPU case of the adversarial suite on a CUDA device (skipped without one): its expected verdict,
no crash, no blame on the problem. tools/gpu_check.py runs this and prints the table that goes into
docs/benchmarks/adversarial.md; each test records expected, got, speedup and the figures of its trust
report as junit properties."""

from __future__ import annotations

import time

import pytest
import torch

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.problems import load_problem
from tests.adversarial import cases
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


# -- launch-bound shapes are timed in batches; others are not ------------------------------------
BATCHED = "timed in batches of"
ROOT = cases.HERE.parents[1]
KERNELBENCH = next(
    (p for p in (ROOT.parent / "shared", ROOT.parents[1] / "shared") if (p / "kernelbench").is_dir()),
    ROOT.parent / "shared",
) / "kernelbench" / "problems.jsonl"
MATMUL = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, a, b):\n        return torch.matmul(a, b)\n"
)


async def _evaluate(gpu_evaluator, problem_spec: str, source: str):
    problem = load_problem(problem_spec)
    return await gpu_evaluator.evaluate(problem, source, device="cuda", settings=SETTINGS, use_cache=False)


async def test_a_launch_bound_shape_is_timed_in_batches_at_its_honest_speed(gpu_evaluator) -> None:
    # The honest control of the launch-bound problem: a few microseconds a call, so its timed calls
    # go in batches (the finding says how many) and it passes near the reference's speed.
    source = (cases.HERE / "gpu" / "gpu_honest_launch_bound.py").read_text()
    evaluation = await _evaluate(gpu_evaluator, str(cases.HERE / "problems" / "gpu_relu_add_tiny.py"), source)
    assert evaluation.status.value == "passed", evaluation.message
    findings = evaluation.trust.findings if evaluation.trust else []
    assert any(BATCHED in f for f in findings), findings
    assert 0.6 < evaluation.speedups["eager"] < 1.6, evaluation.speedups


async def test_a_level_1_matmul_is_not_batched(gpu_evaluator, record_property) -> None:
    # KernelBench level 1, problem 1 (a 4096 x 4096 fp32 matmul: milliseconds) where ../shared has
    # it, else this suite's own 2048 x 4096 x 2048 matmul (0.6 ms on an H200): every call is a GO of
    # its own, exactly as before batches existed.
    spec = f"{KERNELBENCH}:1/1" if KERNELBENCH.exists() else str(cases.HERE / "problems" / "gpu_matmul.py")
    record_property("problem", spec)
    evaluation = await _evaluate(gpu_evaluator, spec, MATMUL)
    assert evaluation.status.value == "passed", evaluation.message
    findings = evaluation.trust.findings if evaluation.trust else []
    assert not any(BATCHED in f for f in findings), findings
