"""KernelBench-style problems: the record and the loaders."""

from stark_mcp.problems.declarations import Declarations, declarations_of, shape_label
from stark_mcp.problems.errors import ProblemError
from stark_mcp.problems.loading import load_problem, problem_from_source
from stark_mcp.problems.record import Problem

__all__ = [
    "Declarations", "Problem", "ProblemError", "declarations_of", "load_problem", "problem_from_source",
    "shape_label",
]
