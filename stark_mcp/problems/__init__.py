"""KernelBench-style problems: the ``Problem`` record, its content hash and the loaders."""

from stark_mcp.problems.errors import ProblemError
from stark_mcp.problems.loading import load_problem, problem_from_source
from stark_mcp.problems.problem import Problem, source_hash

__all__ = ["Problem", "ProblemError", "load_problem", "problem_from_source", "source_hash"]
