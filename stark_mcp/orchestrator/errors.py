from stark_mcp.errors import StarkError


class RunError(StarkError):
    """A run-level request was refused; nothing was recorded."""


class BudgetExhausted(RunError):
    """The run already holds as many attempts as its budget allows."""


class InvalidInput(RunError):
    """An argument is malformed (unknown role, oversized source, no ModelNew, ...)."""
