"""Parsing under threads: the CPython 3.11 AST depth race is parsed again, nothing else is hidden."""

from __future__ import annotations

import ast

import pytest

from stark_mcp import python_ast


def _failing(times: int, message: str):
    real, calls = ast.parse, []

    def parse(*args, **kwargs):
        calls.append(args)
        if len(calls) <= times:
            raise SystemError(message)
        return real(*args, **kwargs)

    return parse, calls


def test_a_parse_disturbed_by_another_thread_is_parsed_again(monkeypatch) -> None:
    parse, calls = _failing(2, "AST constructor recursion depth mismatch (before=168, after=188)")
    monkeypatch.setattr(ast, "parse", parse)
    tree = python_ast.parse("class ModelNew:\n    pass\n", filename="candidate.py")
    assert [n.name for n in tree.body] == ["ModelNew"] and len(calls) == 3


@pytest.mark.parametrize(
    "failures,message,tries",
    [
        (1, "some other interpreter failure", 1),  # not the race: raised at once
        (100, "AST constructor recursion depth mismatch (before=1, after=2)", 5),  # never ends: raised
    ],
)
def test_what_is_not_a_passing_race_is_raised(monkeypatch, failures, message, tries) -> None:
    parse, calls = _failing(failures, message)
    monkeypatch.setattr(ast, "parse", parse)
    with pytest.raises(SystemError, match=message.split(" (")[0]):
        python_ast.parse("x = 1")
    assert len(calls) == tries


def test_a_syntax_error_is_raised_as_usual() -> None:
    with pytest.raises(SyntaxError):
        python_ast.parse("def (:")
