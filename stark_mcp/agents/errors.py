"""The agents layer's exception, rooted at ``StarkError``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stark_mcp.errors import StarkError

if TYPE_CHECKING:
    from stark_mcp.agents.roles import Exchange


class AgentError(StarkError):
    """A prompt could not be rendered, or a reply could not be used.

    The message is written for whoever acts on it next: the model being re-asked, or the
    user fixing a template. ``exchanges`` holds every model call made before giving up, so
    the caller can store them with the failed attempt.
    """

    def __init__(self, message: str, exchanges: list[Exchange] | None = None) -> None:
        super().__init__(message)
        self.exchanges: list[Exchange] = list(exchanges or [])
