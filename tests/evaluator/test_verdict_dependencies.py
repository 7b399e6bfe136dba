"""A cached verdict is reused only while everything it depends on is unchanged (issue 37, part B):
the user's own modules, the evaluator's code, torch, and every setting that changes a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator import Evaluator
from stark_mcp.evaluator.host import verdict_dependencies
from stark_mcp.evaluator.host.settings import CPU_TOLERANCES
from stark_mcp.problems import load_problem
from stark_mcp.problems.user_files import user_files
from stark_mcp.records import Dependencies, Status
from tests.evaluator.conftest import FAST
from tests.toolchain import shared_toolchain

PROBLEM = '''
import torch
import torch.nn as nn

STARK_IMPORT_ROOTS = [{root!r}]

from mylib.layers import activate  # noqa: E402


class Model(nn.Module):
    def forward(self, x):
        return activate(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
'''

LAYERS = '''
from .act import {name}


def activate(x):
    return {name}(x)
'''


def user_project(folder: Path, act: str = "gelu") -> Path:
    root = folder / "project"
    (root / "mylib").mkdir(parents=True)
    (root / "mylib" / "__init__.py").write_text("")
    (root / "mylib" / "layers.py").write_text(LAYERS.format(name=act))
    (root / "mylib" / "act.py").write_text("from torch.nn.functional import gelu, relu  # noqa: F401\n")
    (root / "mylib" / "unused.py").write_text("raise SystemExit('never imported')\n")
    (root / "helpers.py").write_text("")
    return root


def test_the_users_files_are_the_import_closure_under_the_roots(tmp_path: Path) -> None:
    root = user_project(tmp_path)
    found = user_files([str(root)], [PROBLEM.format(root=str(root))])
    assert set(found) == {"mylib/__init__.py", "mylib/layers.py", "mylib/act.py"}  # not unused.py
    (root / "mylib" / "act.py").write_text("from torch.nn.functional import gelu, relu\nimport helpers\n")
    again = user_files([str(root)], [PROBLEM.format(root=str(root))])
    assert set(again) == {*found, "helpers.py"} and again["mylib/act.py"] != found["mylib/act.py"]
    # from pkg import submodule, and a candidate's own imports, count too
    assert "mylib/unused.py" in user_files([str(root)], ["from mylib import unused"])
    assert user_files([], [PROBLEM.format(root=str(root))]) == {}


def test_changes_say_what_differs() -> None:
    old = Dependencies(evaluator="a", torch="2.11", device="cpu", isolation="sandbox",
                       settings={"trials": 5}, user_files={"mylib/layers.py": "1"})  # fmt: skip
    new = old.model_copy(update={"evaluator": "b", "torch": "2.12", "settings": {"trials": 6},
                                 "user_files": {"mylib/layers.py": "2"}})  # fmt: skip
    said = verdict_dependencies.changes(old, new)
    assert said[0] == "the user's module mylib/layers.py changed"
    assert any("evaluator's code changed" in s for s in said)
    assert "torch changed (2.11 -> 2.12)" in said and "the setting trials changed" in said
    assert verdict_dependencies.changes(old, old) == [] and old.digest != new.digest
    assert verdict_dependencies.changes(None, new)  # a result from before the records: says so


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
@pytest.mark.anyio
async def test_a_changed_dependency_turns_a_cached_pass_into_a_fresh_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = user_project(tmp_path)
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(root=str(root)))
    problem = load_problem(str(path))
    cache = tmp_path / "cache"
    async with Evaluator(cache, FAST, toolchain_dir=shared_toolchain()) as ev:
        first = await ev.evaluate(problem, CANDIDATE, device="cpu")
        assert first.status is Status.PASSED, first.message
        assert first.dependencies is not None and "mylib/layers.py" in first.dependencies.user_files
        hit = await ev.evaluate(problem, CANDIDATE, device="cpu")
        assert hit.cached and hit.reevaluated is None

        # The user's module changes on disk (gelu -> relu): the candidate is now wrong, and says so.
        (root / "mylib" / "layers.py").write_text(LAYERS.format(name="relu"))
        changed = await ev.evaluate(problem, CANDIDATE, device="cpu")
        assert not changed.cached and changed.status is Status.WRONG_OUTPUT
        assert changed.reevaluated is not None
        assert "the user's module mylib/layers.py changed" in changed.reevaluated
        (root / "mylib" / "layers.py").write_text(LAYERS.format(name="gelu"))
        assert (await ev.evaluate(problem, CANDIDATE, device="cpu")).cached  # back as it was

        # A tolerance (now a setting the worker receives) is part of the key.
        looser = FAST.model_copy(update={"cpu_timing": CPU_TOLERANCES.model_copy(update={"rel_slack": 0.2})})
        tol = await ev.evaluate(problem, CANDIDATE, device="cpu", settings=looser)
        assert not tol.cached and tol.reevaluated and "the setting cpu_timing changed" in tol.reevaluated

        # The evaluator's code and torch: seams, as an upgrade would change them.
        monkeypatch.setattr(verdict_dependencies, "evaluator_digest", lambda: "0123456789abcdef")
        code = await ev.evaluate(problem, CANDIDATE, device="cpu")
        assert not code.cached and code.reevaluated and "the evaluator's code changed" in code.reevaluated
        monkeypatch.setattr(verdict_dependencies, "torch_version", lambda: "9.9.9")
        upgraded = await ev.evaluate(problem, CANDIDATE, device="cpu")
        assert not upgraded.cached and upgraded.reevaluated
        assert "torch changed" in upgraded.reevaluated and upgraded.status is Status.PASSED


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_eval_says_the_users_module_changed_instead_of_answering_from_the_cache(tmp_path: Path) -> None:
    from tests.evaluator.test_cli import run_cli

    root = user_project(tmp_path)
    problem, candidate = tmp_path / "problem.py", tmp_path / "candidate.py"
    problem.write_text(PROBLEM.format(root=str(root)))
    candidate.write_text(CANDIDATE)
    args = (str(problem), str(candidate), "--device", "cpu", "--baselines", "eager")
    first = run_cli(*args, home=tmp_path / "home")
    assert first.stdout.startswith("passed"), first.stdout + first.stderr
    (root / "mylib" / "layers.py").write_text(LAYERS.format(name="relu"))
    second = run_cli(*args, home=tmp_path / "home")
    assert second.stdout.startswith("wrong_output"), second.stdout + second.stderr
    assert "(cached result)" not in second.stdout
    assert "re-evaluated: the user's module mylib/layers.py changed since the cached result" in second.stdout
