"""``stark_mcp.capture`` in the user's program, and problems made from what it saved."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

import stark_mcp
from stark_mcp.orchestrator.own_module import create_problem, problem_request
from stark_mcp.problems import load_problem
from stark_mcp.usercode import CaptureError
from stark_mcp.usercode.capture import CAPTURE_FORMAT

from .conftest import USER_PACKAGE
from .test_problem_new import run_problem

# The user's program: three ways to capture, each into its own file.
USER_PROGRAM = textwrap.dedent("""
    import sys
    import torch
    import stark_mcp
    from mylib import layers
    from mylib.layers import Encoder

    out = sys.argv[1]
    torch.manual_seed(0)
    model = Encoder(16, 32).eval()
    for batch, seq in ((2, 3), (4, 8)):
        path = f"{out}/mlp_b{batch}.pt"
        with stark_mcp.capture(path, model.mlp, init_args=[16, 32], init_kwargs={"scale": 0.5}):
            model(torch.randn(batch, seq, 16))

    # A decorated class saves its constructor's arguments too; a decorated function its first call.
    Captured = stark_mcp.capture(f"{out}/decorated.pt")(layers.ScaledMLP)
    Captured(16, 32)(torch.randn(2, 16), mask=torch.ones(2, dtype=torch.bool))
    gelu = stark_mcp.capture(f"{out}/gelu.pt")(layers.gelu_mul)
    gelu(torch.randn(3, 5), torch.randn(3, 5), approximate="tanh")
    gelu(torch.randn(9, 9), torch.randn(9, 9))  # only the first call is saved
""")


@pytest.fixture(scope="module")
def user_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the user project for the module: these tests only read it."""
    project = tmp_path_factory.mktemp("capture") / "proj"
    shutil.copytree(USER_PACKAGE, project)
    return project


@pytest.fixture(scope="module")
def captured(user_project: Path) -> Path:
    out = user_project / "captures"
    program = user_project / "program.py"
    program.write_text(USER_PROGRAM)
    done = subprocess.run(
        [sys.executable, str(program), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(user_project / "src"), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def load(path: Path) -> dict:
    return torch.load(path, weights_only=True)  # never runs code from the file


def test_the_files_hold_the_call_the_arguments_and_nothing_unsafe(captured: Path) -> None:
    call = load(captured / "mlp_b2.pt")
    assert call["format"] == CAPTURE_FORMAT and call["target"] == "mylib.layers:ScaledMLP"
    assert call["kind"] == "module" and call["init_args"] == [16, 32]
    assert call["init_kwargs"] == {"scale": 0.5}
    assert [tuple(a.shape) for a in call["args"]] == [(2, 3, 16)] and call["kwargs"] == {}
    assert call["module_dtype"] == "float32" and call["device"] == "cpu"
    decorated = load(captured / "decorated.pt")
    assert decorated["init_args"] == [16, 32] and decorated["init_kwargs"] == {}
    assert decorated["kwargs"]["mask"].dtype == torch.bool
    gelu = load(captured / "gelu.pt")
    assert gelu["target"] == "mylib.layers:gelu_mul" and gelu["kind"] == "function"
    assert [tuple(a.shape) for a in gelu["args"]] == [(3, 5), (3, 5)]
    assert gelu["kwargs"] == {"approximate": "tanh"}


@pytest.mark.anyio
async def test_two_captures_make_a_problem_with_two_input_sets(captured: Path, user_project: Path) -> None:
    request = problem_request(
        captures=[str(captured / "mlp_b2.pt"), str(captured / "mlp_b4.pt")], project_root=str(user_project)
    )
    created = await create_problem(request, None)
    assert created.target == "mylib.layers:ScaledMLP" and created.init_inputs == [16, 32, 0.5]
    assert created.shapes == {
        "capture=mlp_b2": "x: float32[2, 3, 16]",
        "capture=mlp_b4": "x: float32[4, 8, 16]",
    }
    problem = load_problem(created.path)
    assert problem.shapes == ({"capture": "mlp_b2"}, {"capture": "mlp_b4"})
    assert "_fresh_like(call['args'][0]),  # x: fresh values like the captured ones" in problem.source
    report = run_problem(created.path)
    assert report["is_target"] and report["sets"] == {
        "capture=mlp_b2": {"args": [[2, 3, 16]], "out": [2, 3, 16], "finite": True},
        "capture=mlp_b4": {"args": [[4, 8, 16]], "out": [4, 8, 16], "finite": True},
    }
    # A function's capture: its keyword argument is passed by keyword, the values as captured.
    function = await create_problem(
        problem_request(
            captures=[str(captured / "gelu.pt")], captured_values=True, project_root=str(user_project)
        ),
        None,
    )
    assert function.kind == "function"
    assert function.shapes == {"default": "x: float32[3, 5]; y: float32[3, 5]; approximate='tanh'"}
    assert "return gelu_mul(x, y, approximate=approximate)" in function.source
    assert "call['args'][0].clone(),  # x: the captured values" in function.source


class Local(nn.Module):
    def forward(self, x, extra=None):
        return x * 2


def test_unstorable_inputs_and_empty_blocks_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = Local()
    path = tmp_path / "call.pt"
    with (
        pytest.raises(CaptureError, match=r"cannot capture argument 'extra': it is a builtins.object"),
        stark_mcp.capture(path, module),
    ):
        module(torch.ones(2), extra=object())
    assert not path.exists()
    with (
        pytest.raises(CaptureError, match="Local.forward was not called inside the with block"),
        stark_mcp.capture(path, module),
    ):
        pass
    with pytest.raises(CaptureError, match="give the nn.Module instance"), stark_mcp.capture(path, object()):
        pass
    with pytest.raises(CaptureError, match="not a torch.nn.Module"):
        stark_mcp.capture(path)(dict)
    # Inside problem files and stark-mcp's own processes capturing is off: nothing is written.
    monkeypatch.setenv("STARK_CAPTURE", "off")
    with stark_mcp.capture(path, module):
        module(torch.ones(2))
    assert not path.exists()
    monkeypatch.delenv("STARK_CAPTURE")
    with stark_mcp.capture(path, module):
        module(torch.ones(2), extra=[torch.zeros(1), {"k": 1.5}])
    call = load(path)
    assert call["init_args"] is None and "constructor arguments of Local are unknown" in call["init_note"]
    assert call["kwargs"]["extra"][1] == {"k": 1.5}


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
@pytest.mark.anyio
async def test_a_file_not_written_by_capture_is_refused(user_project: Path, tmp_path: Path) -> None:
    not_a_capture = tmp_path / "weights.pt"
    torch.save({"weight": torch.ones(2)}, not_a_capture)
    with pytest.raises(CaptureError, match="weights.pt was not written by stark_mcp.capture"):
        await create_problem(
            problem_request(
                captures=[str(not_a_capture)], project_root=str(user_project), target="mylib.layers:ScaledMLP"
            ),
            None,
        )
