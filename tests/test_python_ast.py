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


def test_other_errors_are_not_retried(monkeypatch) -> None:
    parse, calls = _failing(1, "some other interpreter failure")
    monkeypatch.setattr(ast, "parse", parse)
    with pytest.raises(SystemError, match="some other"):
        python_ast.parse("x = 1")
    assert len(calls) == 1
    monkeypatch.undo()
    with pytest.raises(SyntaxError):
        python_ast.parse("def (:")


def test_a_race_that_never_ends_is_raised_not_looped_on(monkeypatch) -> None:
    parse, calls = _failing(100, "AST constructor recursion depth mismatch (before=1, after=2)")
    monkeypatch.setattr(ast, "parse", parse)
    with pytest.raises(SystemError, match="mismatch"):
        python_ast.parse("x = 1")
    assert len(calls) == 5
