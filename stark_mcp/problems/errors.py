from stark_mcp.errors import StarkError


class ProblemError(StarkError):
    """A problem could not be found, parsed or run; the message names what is wrong."""
