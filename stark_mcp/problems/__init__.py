"""KernelBench-style problems: the ``Problem`` record, its content hash and the loaders."""

from stark_mcp.problems.declarations import Declarations, declarations_of, shape_label
from stark_mcp.problems.errors import ProblemError
from stark_mcp.problems.loading import load_problem, problem_from_source, spec_path
from stark_mcp.problems.problem import Problem, source_hash

__all__ = [
    "Declarations",
    "Problem",
    "ProblemError",
    "declarations_of",
    "load_problem",
    "problem_from_source",
    "shape_label",
    "source_hash",
    "spec_path",
]
