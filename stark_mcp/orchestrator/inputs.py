"""Checks on what clients send before anything is evaluated or recorded.

Pure functions: both the MCP tools and the headless loop pass every source and
problem argument through here, so a bad input fails the same way everywhere.
"""

from __future__ import annotations

import ast

from stark_mcp.orchestrator.errors import InvalidInput
from stark_mcp.problems import Problem, ProblemError, load_problem, problem_from_source

MAX_SOURCE_BYTES = 512 * 1024
MAX_PLAN_BYTES = 512 * 1024
ROLES = ("plan", "code", "debug", "generalist")


def check_candidate_source(source: str) -> None:
    """A candidate must be Python of sane size that defines ``class ModelNew``."""
    size = len(source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        raise InvalidInput(f"source is {size} bytes; the limit is {MAX_SOURCE_BYTES} bytes")
    if not source.strip():
        raise InvalidInput("source is empty; send the full Python file that defines class ModelNew")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        # Still recordable as a load_error by the evaluator, but a missing class is
        # decided here only when the file parses.
        del exc
        return
    if not any(isinstance(s, ast.ClassDef) and s.name == "ModelNew" for s in tree.body):
        raise InvalidInput(
            "source defines no top-level class ModelNew; send the whole file with "
            "class ModelNew(nn.Module) taking the same constructor arguments as Model"
        )


def check_plan_text(plan: str | None) -> None:
    if plan is not None and len(plan.encode("utf-8")) > MAX_PLAN_BYTES:
        raise InvalidInput(f"plan is larger than {MAX_PLAN_BYTES} bytes")


def check_role(role: str) -> str:
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
    return role


def resolve_problem(problem: str, name: str | None = None) -> Problem:
    """``problem`` is a path or spec that ``load_problem`` accepts, or the problem source itself."""
    if not problem.strip():
        raise ProblemError("problem is empty: pass a path to a problem file or the problem source")
    looks_like_source = "\n" in problem or "class Model" in problem
    if not looks_like_source:
        loaded = load_problem(problem)
        return loaded.model_copy(update={"name": name}) if name else loaded
    if len(problem.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise InvalidInput(f"problem source is larger than {MAX_SOURCE_BYTES} bytes")
    return problem_from_source(problem, name=name or "problem")
