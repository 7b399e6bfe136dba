"""The store's exceptions: everything the persistence layer raises on purpose."""

from stark_mcp.errors import StarkError


class StoreError(StarkError):
    """The database cannot do what was asked: bad tree shape, newer schema, unusable file."""


class NotFound(StoreError):
    """A run, node, evaluation or exchange does not exist; the message names its kind and id."""
