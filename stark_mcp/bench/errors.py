from stark_mcp.errors import StarkError


class BenchError(StarkError):
    """A benchmark request was refused (bad selection, a different benchmark in --out, ...)."""
