"""An evaluator's scratch folders in the temporary directory: none for one never entered, none left
after it closes (a suite that made evaluators it did not enter left one empty folder each)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from stark_mcp.evaluator import Evaluator
from tests.evaluator.conftest import FAST, evaluate_fixture
from tests.toolchain import shared_toolchain

pytestmark = pytest.mark.anyio


async def test_an_evaluator_leaves_no_scratch_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where this process makes its folders
    Evaluator(tmp_path / "unused", FAST)  # made, never entered
    assert list(scratch.iterdir()) == []
    async with Evaluator(tmp_path / "cache", FAST, toolchain_dir=shared_toolchain()) as evaluator:
        evaluation = await evaluate_fixture(evaluator, "relu_sum.py", "torch_ok.py")
        assert evaluation.passed, evaluation.message
        assert list(scratch.glob("stark-eval-*"))  # the problem's and the candidate's files, while open
    assert sorted(p.name for p in scratch.iterdir()) == []
