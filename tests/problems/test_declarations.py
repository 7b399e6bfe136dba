"""SHAPES, STARK_IMPORT_ROOTS and STARK_TARGET: read statically, malformed ones refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.problems import Problem, ProblemError, load_problem, problem_from_source, shape_label
from stark_mcp.problems.declarations import MAX_SHAPES

BODY = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs(batch=8, seq=16):
    return [torch.randn(batch, seq)]


def get_init_inputs():
    return []
"""


def with_header(header: str, body: str = BODY) -> str:
    return header + "\n" + body


def test_a_problem_without_declarations_has_one_default_shape() -> None:
    problem = problem_from_source(BODY)
    assert problem.shapes == () and problem.import_roots == () and problem.target is None
    assert problem.shape_labels == ["default"]


def test_shapes_roots_and_target_are_read_and_labelled(tmp_path: Path) -> None:
    source = with_header(
        'SHAPES = [{"batch": 8, "seq": 128}, {"batch": 32, "seq": 512}]\n'
        f'STARK_IMPORT_ROOTS = ["{tmp_path}", "{tmp_path}/"]\n'
        'STARK_TARGET = "mylib.layers:ScaledMLP"\n'
    )
    path = tmp_path / "p.py"
    path.write_text(source)
    problem = load_problem(str(path))
    assert problem.shapes == ({"batch": 8, "seq": 128}, {"batch": 32, "seq": 512})
    assert problem.shape_labels == ["batch=8,seq=128", "batch=32,seq=512"]
    assert problem.import_roots == (str(tmp_path),)  # normalized and de-duplicated
    assert problem.target == "mylib.layers:ScaledMLP"
    # The identity is the text alone, and a stored problem reads its declarations back.
    again = Problem.model_validate_json(problem.model_dump_json())
    assert again == problem and again.hash == problem.hash and hash(again) == hash(problem)


def test_labels_of_other_values() -> None:
    assert shape_label({}) == "default"
    assert shape_label({"size": (4, 8), "causal": True, "mode": "fast"}) == "size=4x8,causal=True,mode=fast"


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ("SHAPES = []", "non-empty list"),
        ("SHAPES = {'batch': 8}", "non-empty list"),
        ("SHAPES = [8, 16]", "SHAPES[0] is int"),
        ("SHAPES = [{'batch': 8}, {'batch': 8}]", "SHAPES[1] repeats SHAPES[0] (batch=8)"),
        ("SHAPES = [{'class': 8}]", "'class' is not a Python parameter name"),
        ("SHAPES = [{1: 8}]", "key 1 is not a Python parameter name"),
        ("SHAPES = [{'batch': float('inf')}]", "must be a literal"),
        ("SHAPES = [{'batch': {'a': 1}}]", "is not a plain value"),
        ("SHAPES = [dict(batch=b) for b in (8, 16)]", "line 1: SHAPES must be a literal"),
        ("SHAPES = [{'batch': 8}]\nSHAPES = [{'batch': 16}]", "assigned 2 times"),
        ("SHAPES = [{'batch': 8}]\nSHAPES += [{'batch': 16}]", "line 2: SHAPES is changed after"),
        ("SHAPES: list", "annotated but never given a value"),
        ("SHAPES = [{'batch': 8, 'width': 3}]", "passes width but get_inputs accepts batch, seq"),
        (f"SHAPES = [{{'batch': i}} for i in range({MAX_SHAPES + 1})]", "must be a literal"),
        (
            "SHAPES = [" + ", ".join(f"{{'batch': {i}}}" for i in range(MAX_SHAPES + 1)) + "]",
            f"at most {MAX_SHAPES}",
        ),
        ("STARK_IMPORT_ROOTS = 'src'", "must be a list of folder paths"),
        ("STARK_IMPORT_ROOTS = ['src']", "'src' is not an absolute path"),
        ("STARK_TARGET = 'mylib.layers.ScaledMLP'", 'must be "package.module:Name"'),
    ],
)
def test_malformed_declarations_are_refused_with_the_reason(header: str, needle: str) -> None:
    with pytest.raises(ProblemError) as caught:
        problem_from_source(with_header(header))
    assert needle in str(caught.value)
    with pytest.raises(ProblemError):  # building the record directly refuses it too
        Problem(name="p", source=with_header(header))


def test_get_inputs_must_take_the_required_arguments_and_kwargs_accept_all() -> None:
    strict = BODY.replace("def get_inputs(batch=8, seq=16):", "def get_inputs(batch, seq):")
    with pytest.raises(ProblemError, match=r"does not give get_inputs its required argument\(s\) seq"):
        problem_from_source(with_header("SHAPES = [{'batch': 8}]", strict))
    no_args = BODY.replace("def get_inputs(batch=8, seq=16):", "def get_inputs():")
    no_args = no_args.replace("batch, seq", "8, 8")
    with pytest.raises(ProblemError, match="get_inputs accepts no arguments"):
        problem_from_source(with_header("SHAPES = [{'batch': 8}]", no_args))
    kwargs = BODY.replace("def get_inputs(batch=8, seq=16):", "def get_inputs(**shape):")
    problem = problem_from_source(with_header("SHAPES = [{'anything': 1}, {'other': 'x'}]", kwargs))
    assert problem.shape_labels == ["anything=1", "other=x"]


def test_a_source_with_a_syntax_error_declares_nothing_and_the_loader_names_the_line() -> None:
    broken = "SHAPES = [{'batch': 8}]\ndef oops(:\n"
    assert Problem(name="p", source=broken).shapes == ()
    with pytest.raises(ProblemError, match="syntax error at line 2"):
        problem_from_source(broken)


@pytest.mark.parametrize(
    "shape", [{}, {"batch": 8, "seq": 128}, {"dims": [2, 3], "scale": 0.5, "causal": True}]
)
def test_the_evaluator_labels_a_shape_as_the_problem_does(shape: dict) -> None:
    # Results carry the evaluator's labels; the problem, its export and STARK_PROVEN name shapes by
    # shape_label. The evaluator cannot import problems/, so the two must agree by test.
    from stark_mcp.evaluator.common.shapes import label

    assert label(shape) == shape_label(shape)
