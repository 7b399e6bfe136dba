"""Problem loading: files, JSONL entries, KernelBench-style checkouts, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stark_mcp.problems import ProblemError, load_problem, problem_from_source
from stark_mcp.problems.loading import top_level_names

SHARED_JSONL = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "problems.jsonl"

GOOD = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 3


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_python_file_loads_with_its_stem_as_name(tmp_path: Path) -> None:
    problem = load_problem(str(write(tmp_path / "tanh3.py", GOOD)))
    assert problem.name == "tanh3" and problem.source == GOOD
    assert problem.origin == str((tmp_path / "tanh3.py").resolve())
    assert len(problem.hash) == 16 and problem.hash == load_problem(str(tmp_path / "tanh3.py")).hash


def test_jsonl_entries_are_found_by_id_or_by_name(tmp_path: Path) -> None:
    rows = [{"level": 1, "problem_id": 4, "name": "4_Tanh3", "code": GOOD},
            {"level": 2, "problem_id": 4, "name": "4_Other", "code": GOOD.replace("* 3", "* 4")}]
    jsonl = write(tmp_path / "set.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    by_id = load_problem(f"{jsonl}:1/4")
    by_name = load_problem(f"{jsonl}:2/4_Other")
    assert (by_id.name, by_id.level, by_id.problem_id) == ("4_Tanh3", 1, 4)
    assert by_name.name == "4_Other" and "* 4" in by_name.source


@pytest.mark.skipif(not SHARED_JSONL.exists(), reason="needs ../shared/kernelbench")
def test_the_shared_kernelbench_jsonl_loads() -> None:
    problem = load_problem(f"{SHARED_JSONL}:1/19")
    assert problem.level == 1 and problem.problem_id == 19 and "class Model" in problem.source


def test_a_kernelbench_checkout_is_searched_by_level_and_id(tmp_path: Path) -> None:
    level = tmp_path / "KernelBench" / "level2"
    level.mkdir(parents=True)
    write(level / "17_Tanh_Scale.py", GOOD)
    problem = load_problem(f"{tmp_path}:2/17")
    assert (problem.name, problem.level, problem.problem_id) == ("17_Tanh_Scale", 2, 17)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace("def forward(self, x):", "def forward(self, x)"), "syntax error at line 6"),
        (GOOD.replace("def get_inputs", "def make_inputs"), "missing get_inputs"),
        (GOOD.replace("class Model", "class Net"), "missing Model"),
    ],
)
def test_broken_files_name_what_is_wrong(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ProblemError, match=needle):
        load_problem(str(write(tmp_path / "bad.py", text)))


def test_bad_specs_get_clear_errors(tmp_path: Path) -> None:
    jsonl = write(tmp_path / "set.jsonl",
        json.dumps({"level": 1, "problem_id": 1, "name": "1_A", "code": GOOD}))
    with pytest.raises(ProblemError, match="no such problem file"):
        load_problem(str(tmp_path / "missing.py"))
    with pytest.raises(ProblemError, match="needs LEVEL/ID"):
        load_problem(str(jsonl))
    with pytest.raises(ProblemError, match="no problem with level 3"):
        load_problem(f"{jsonl}:3/1")
    with pytest.raises(ProblemError, match="needs LEVEL/ID"):
        load_problem(str(tmp_path))
    garbage = write(tmp_path / "garbage.jsonl", "{not json}\n")
    with pytest.raises(ProblemError, match="garbage.jsonl:1: not a problem record"):
        load_problem(f"{garbage}:1/1")
    # The file is there; only the selector is wrong, and the message says so.
    with pytest.raises(ProblemError, match=r"exists but 'abc' is not a selector; use LEVEL/ID"):
        load_problem(f"{jsonl}:abc")


def test_source_text_is_checked_too() -> None:
    assert problem_from_source(GOOD, name="inline").name == "inline"
    with pytest.raises(ProblemError, match="missing get_init_inputs"):
        problem_from_source(GOOD.replace("def get_init_inputs", "def init_args"))


def test_top_level_names_cover_defs_assignments_and_imports() -> None:
    import ast

    tree = ast.parse("import a.b\nfrom c import d as e\nx = 1\ny: int = 2\ndef f(): pass\nclass K: pass\n")
    assert top_level_names(tree) == {"a", "e", "x", "y", "f", "K"}
