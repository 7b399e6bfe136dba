"""The orchestrator's exceptions: a refused request, or an expansion that produced no attempt."""

from collections.abc import Sequence

from stark_mcp.errors import StarkError


class RunError(StarkError):
    """A run-level request was refused; nothing was recorded."""


class BudgetExhausted(RunError):
    """The run already holds as many attempts as its budget allows."""


class InvalidInput(RunError):
    """An argument is malformed (unknown role, oversized source, no ModelNew, ...)."""


class ExpansionFailed(RunError):
    """The agents produced no candidate. ``fatal``: retrying is pointless (no key, key refused)."""

    def __init__(self, message: str, *, exchange_ids: Sequence[int] = (), fatal: bool = False) -> None:
        super().__init__(message)
        self.exchange_ids = list(exchange_ids)
        self.fatal = fatal


class ExportRefused(RunError):
    """The node cannot be exported as a kernel: it is the reference, or it did not pass."""


class WarmEvaluatorUnavailable(RunError):
    """No warm evaluator can take this evaluation (its folder is refused, it would not start, it
    refused the request); the caller evaluates in its own process."""


class WarmEvaluatorLost(RunError):
    """The warm evaluator stopped during an evaluation. ``verdict``: the verdict it had sent, if any."""

    def __init__(self, message: str, verdict: object | None = None) -> None:
        super().__init__(message)
        self.verdict = verdict


class WarmEvaluationFailed(RunError):
    """The evaluation in the warm evaluator raised the error whose message this carries (what the
    same evaluation in this process would have raised)."""
