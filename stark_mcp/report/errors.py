from stark_mcp.errors import StarkError


class ReportError(StarkError):
    """A report cannot be made (unreadable benchmark folder, plotting unavailable, ...)."""
