"""``Evaluator.prepare`` (``doctor --prepare``, ``create_run`` on a GPU) makes the shared precompiled
header before any attempt: a first candidate build with the same flags then makes nothing itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.evaluator.host import prepare
from stark_mcp.problems import load_problem
from tests.toolchain import shared_toolchain

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"


async def test_a_prepared_machine_s_first_build_makes_no_shared_header(tmp_path, monkeypatch) -> None:
    # one flag set (ext_ok.py's: none), to keep to one header's making on a 2-core machine
    monkeypatch.setattr(prepare, "FLAG_SETS", (("no flags", [], []),))
    settings = EvalSettings(baselines=("eager",), min_time_s=0.005, max_time_s=0.3, build_timeout_s=600.0)
    toolchain = tmp_path / "toolchain"  # fresh: nothing made on this "machine" yet
    async with Evaluator(tmp_path / "cache", settings, toolchain_dir=toolchain) as ev:
        made = await ev.prepare("cpu")
        assert any("pch" in note for note in made), made
        assert list((toolchain / "primed").glob("*.pch"))
        assert await ev.prepare("cpu") == []  # made once per machine and flags
        headers = {gch: gch.stat().st_mtime_ns for gch in toolchain.glob("pch/*/**/*.gch")}
        assert headers
        evaluation = await ev.evaluate(
            load_problem(str(FIXTURES / "relu_sum.py")), (FIXTURES / "ext_ok.py").read_text(), device="cpu",
        )
    assert evaluation.passed, evaluation.message
    assert evaluation.extensions and not evaluation.extensions[0]["cached"]  # it did build
    # ... with the header made ahead: found, not made again, and no other made for it
    after = {gch: gch.stat().st_mtime_ns for gch in toolchain.glob("pch/*/**/*.gch")}
    assert after == headers
    primed = [note for ext in evaluation.extensions for note in ext.get("primed", [])]
    assert "pch torch/extension.h: ready" in primed, primed


def test_doctor_prepare_makes_them_once(tmp_path, monkeypatch) -> None:
    """``stark-mcp doctor --prepare``: made once per machine (the run's shared toolchain directory),
    then nothing left to make."""
    import json

    from typer.testing import CliRunner

    from stark_mcp.cli import app
    from tests.toolchain import VARIABLE

    monkeypatch.setattr(prepare, "FLAG_SETS", (("no flags", [], []),))
    monkeypatch.setenv("STARK_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("STARK_DEVICE", "cpu")
    monkeypatch.setenv(VARIABLE, str(shared_toolchain()))
    first = CliRunner().invoke(app, ["doctor", "--prepare", "--json"])
    assert first.exit_code == 0, first.output
    assert isinstance(json.loads(first.output)["prepared"], list)
    again = CliRunner().invoke(app, ["doctor", "--prepare"])
    assert again.exit_code == 0, again.output
    assert "prepared: nothing to make, all made before" in again.output
