"""The trusted evaluator: builds, checks and times candidate kernels in isolated processes.

See docs/evaluator.md. Code under ``child/`` runs inside those processes and imports only the
standard library and torch.
"""

from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.service import Evaluator
from stark_mcp.evaluator.settings import BASELINE_NAMES, EvalSettings
from stark_mcp.evaluator.static_checks import StaticResult, check_candidate
from stark_mcp.evaluator.worker import Worker

__all__ = [
    "BASELINE_NAMES",
    "EvalSettings",
    "Evaluator",
    "EvaluatorError",
    "StaticResult",
    "Worker",
    "check_candidate",
]
