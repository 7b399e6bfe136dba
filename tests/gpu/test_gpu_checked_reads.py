"""On a GPU, a checked call's outputs are copied from the shared region (the runner copies into it on
every call) with the runner frozen, and the copy finishes before it is thawed; outputs compared in
place stay frozen throughout. Both paths still give an honest candidate its pass, every check made."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.problems import load_problem

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.anyio,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cuda"
HONEST = (FIXTURES / "cand_relu_add_torch.py").read_text(encoding="utf-8")
SETTINGS = EvalSettings(
    trials=3, baselines=("eager",), max_time_s=0.3, min_time_s=0.1, profile=False, sanitize=False
)
IN_PLACE = SETTINGS.model_copy(update={"compare_in_place_bytes": 0})

async def test_checked_reads_on_a_gpu_frozen_still_pass_the_honest(tmp_path: Path) -> None:
    problem = load_problem(str(FIXTURES / "problem_relu_add.py"))
    async with Evaluator(tmp_path / "cache", SETTINGS) as ev:
        for settings in (SETTINGS, IN_PLACE):
            honest = await ev.evaluate(problem, HONEST, device="cuda", settings=settings, use_cache=False)
            assert honest.passed, honest.message
            assert honest.trust is not None and honest.trust.checked_calls >= settings.trials
