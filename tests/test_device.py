"""One ``Device``: every door that takes a device name checks it with ``Device.parse``, so each says
the same thing about a bad one, and no other module keeps its own list of the three names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from stark_mcp.bench import BenchSpec, plan_bench
from stark_mcp.bench.errors import BenchError
from stark_mcp.cli import app
from stark_mcp.config import ConfigError, Settings
from stark_mcp.device import DEVICE_NAMES, Device, InvalidDevice
from stark_mcp.evaluator import Evaluator
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.orchestrator import warm_wire

PACKAGE = Path(__file__).resolve().parents[1] / "stark_mcp"
SAID = "must be auto, cpu or cuda, not 'tpu'"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the evaluator is asyncio code


def test_parse_takes_the_three_names_and_says_which_they_are() -> None:
    assert [Device.parse(name) for name in ("auto", "cpu", "cuda")] == [Device.AUTO, Device.CPU, Device.CUDA]
    assert Device.parse(Device.CUDA) is Device.CUDA
    assert DEVICE_NAMES == "auto, cpu or cuda"
    # a Device is its name wherever a string was: records, cache keys, the worker's frames
    assert Device.CPU == "cpu" and f"{Device.CUDA}" == "cuda" and {"cpu": 1}[Device.CPU] == 1
    for bad in ("tpu", "CPU", "cuda:0", "", None, 3):
        with pytest.raises(InvalidDevice, match="device must be auto, cpu or cuda, not "):
            Device.parse(bad)
    with pytest.raises(EvaluatorError, match=f"--device {SAID}"):
        Device.parse("tpu", what="--device", error=EvaluatorError)


def test_every_door_says_the_same_about_a_bad_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=f"STARK_DEVICE='tpu' is not usable: device {SAID}"):
        Settings.from_env({"STARK_DEVICE": "tpu"})
    with pytest.raises(BenchError, match=f"--device {SAID}"):
        plan_bench(BenchSpec(problems=str(tmp_path), device="tpu", out=tmp_path / "out"))
    with pytest.raises(ValidationError, match=f"device {SAID}"):
        warm_wire.EvaluateRequest(key="k", problem={}, source="", device="tpu", eval_settings={})
    monkeypatch.setenv("STARK_HOME", str(tmp_path / "home"))
    for command in (["eval", "p.py", "c.py"], ["run", "p.py"], ["verify", "r-x"], ["problem", "new", "a:b"]):
        result = CliRunner().invoke(app, [*command, "--device", "tpu"])
        assert result.exit_code == 2 and f"--device {SAID}" in result.output, (command, result.output)


@pytest.mark.anyio
async def test_the_evaluator_parses_at_its_door(tmp_path: Path) -> None:
    async with Evaluator(tmp_path / "cache") as evaluator:
        resolved = await evaluator.resolve_device("cpu")
        assert resolved is Device.CPU
        with pytest.raises(EvaluatorError, match=f"device {SAID}"):
            await evaluator.resolve_device("tpu")


def _lists_the_device_names(node: ast.AST) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        names = {e.value for e in node.elts if isinstance(e, ast.Constant)}
        return {"auto", "cpu", "cuda"} <= names
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
        return _lists_the_device_names(node.slice)
    return False


def test_no_module_but_device_py_lists_the_device_names() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "device.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(PACKAGE)
        found += [f"{where}:{node.lineno}" for node in ast.walk(tree) if _lists_the_device_names(node)]
    assert found == []
