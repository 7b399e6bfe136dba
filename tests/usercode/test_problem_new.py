"""``stark-mcp problem new`` on a real user package: the file it writes, and its refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stark_mcp.orchestrator.own_module import MADE_BY, _refuse_overwrite, create_problem, problem_request
from stark_mcp.problems import load_problem
from stark_mcp.usercode import SpecError, TargetError

HERE = Path(__file__).resolve().parent


def stark(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STARK_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "stark_mcp", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_problem(path: str | Path, change: Path | None = None) -> dict:
    extra = [str(change)] if change else []
    done = subprocess.run(
        [sys.executable, "-P", str(HERE / "run_problem.py"), str(path), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_the_cli_writes_a_problem_that_imports_the_users_module_and_runs_each_shape(
    user_project: Path,
    tmp_path: Path,
) -> None:
    done = stark(
        "problem",
        "new",
        "mylib.layers:ScaledMLP",
        "--init",
        "32, 64, scale=0.5",
        "--input",
        "x:float32[batch,seq,32]",
        "--input",
        "mask:float32[batch,seq]~ones",
        "--shape",
        "batch=2,seq=4",
        "--shape",
        "batch=8,seq=16",
        "--json",
        home=tmp_path / "home",
        cwd=user_project,
    )
    assert done.returncode == 0, done.stderr
    assert "importing mylib.layers:ScaledMLP" in done.stderr
    assert "running scaled_mlp once on cpu" in done.stderr
    created = json.loads(done.stdout)
    path = user_project / "stark-problems" / "scaled_mlp.py"
    assert created["path"] == str(path) and created["checked_on"] == "cpu"
    assert created["import_roots"] == [str(user_project / "src")]
    assert created["init_inputs"] == [32, 64, 0.5]
    assert created["shapes"] == {
        "batch=2,seq=4": "x: float32[2, 4, 32]; mask: float32[2, 4]",
        "batch=8,seq=16": "x: float32[8, 16, 32]; mask: float32[8, 16]",
    }
    problem = load_problem(str(path))  # what create_run loads
    assert problem.target == "mylib.layers:ScaledMLP"
    assert problem.shape_labels == ["batch=2,seq=4", "batch=8,seq=16"]
    assert problem.import_roots == (str(user_project / "src"),)
    source = path.read_text()
    assert "from mylib.layers import ScaledMLP" in source and "#     class ScaledMLP(nn.Module):" in source

    # Run on its own, the file builds the user's module with the given arguments and feeds every shape;
    # once the user's module changes, it refuses to run: its results belong to the old code.
    layers = user_project / "src" / "mylib" / "layers.py"
    report = run_problem(path, change=layers)
    assert report["is_target"] and not report["training"]
    assert report["state_dict"] == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "scale"]
    assert report["sets"] == {
        "batch=2,seq=4": {"args": [[2, 4, 32], [2, 4]], "out": [2, 4, 32], "finite": True},
        "batch=8,seq=16": {"args": [[8, 16, 32], [8, 16]], "out": [8, 16, 32], "finite": True},
    }
    assert report["after_change"] == (
        f"RuntimeError: {layers} changed since this problem was made; make it again with "
        "stark-mcp problem new"
    )


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
@pytest.mark.anyio
async def test_targets_that_cannot_be_used_are_refused_with_what_is_wrong(user_project: Path) -> None:
    def request(target: str) -> object:
        return problem_request(target=target, project_root=str(user_project), inputs=["x:float32[4,32]"])

    cases = [
        (
            "nolib.layers:ScaledMLP",
            TargetError,
            (
                f"cannot import nolib.layers: No module named 'nolib'; looked in {user_project / 'src'}, "
                f"{user_project}"
            ),
        ),
        (
            "mylib.broken:Thing",
            TargetError,
            "importing mylib.broken failed: ValueError: mylib.broken needs a config file that is missing",
        ),
        (
            "mylib.layers:ScaledMPL",
            TargetError,
            "mylib.layers has no attribute 'ScaledMPL'; it defines Encoder, ScaledMLP, Settings, gelu_mul",
        ),
        ("mylib.layers:Settings", TargetError, "is a class but not a torch.nn.Module"),
    ]
    for target, kind, needle in cases:
        with pytest.raises(kind) as caught:
            await create_problem(request(target), None)
        assert needle in str(caught.value), target
    assert not (user_project / "stark-problems").exists()  # nothing written by a refusal


def test_bad_requests_are_refused_before_anything_runs(tmp_path: Path) -> None:
    cases = [
        ({"target": "mylib.layers:ScaledMLP"}, "no inputs"),
        ({"inputs": ["x:float32[4]"]}, "no target"),
        (
            {"target": "m:F", "inputs": ["x:float32[4]"], "captures": ["a.pt"]},
            "either captures or input specs",
        ),
        ({"target": "m:F", "inputs": ["x:float32[n]"]}, "no shapes were given"),
        (
            {"target": "m:F", "inputs": ["x:float32[4]"], "init_args": [object()]},
            "object is not a plain value",
        ),
        ({"target": "m:F", "inputs": ["x:float32[4]"], "module_dtype": "int8"}, "module dtype 'int8'"),
        ({"target": "m:F", "inputs": ["x:float32[4]"], "name": "../up"}, "problem name '../up'"),
        (
            {"target": "m:F", "inputs": ["x:float32[4]"], "captured_values": True},
            "applies to capture files only",
        ),
        ({"target": "m:F", "inputs": "x"}, "inputs: Input should be a valid list"),
    ]
    for fields, needle in cases:
        with pytest.raises(SpecError) as caught:
            problem_request(**fields)
        assert needle in str(caught.value), fields


def test_an_existing_file_is_replaced_only_when_asked_and_only_if_stark_wrote_it(tmp_path: Path) -> None:
    mine = tmp_path / "p.py"
    mine.write_text(f'"""p: x as a stark-mcp problem ({MADE_BY})."""\n')
    _refuse_overwrite(mine, mine.read_text(), overwrite=False)  # the same text: nothing to do
    with pytest.raises(SpecError, match="already exists and differs; pass overwrite"):
        _refuse_overwrite(mine, "new text", overwrite=False)
    _refuse_overwrite(mine, "new text", overwrite=True)
    theirs = tmp_path / "train.py"
    theirs.write_text("print('the user's own script')\n")
    with pytest.raises(SpecError, match="is not a problem file made by stark-mcp"):
        _refuse_overwrite(theirs, "new text", overwrite=True)
    with pytest.raises(SpecError, match="a problem file's name ends in .py"):
        _refuse_overwrite(tmp_path / "notes.txt", "new text", overwrite=True)
