"""The LLM layer's exceptions, rooted at ``StarkError``.

Callers (agents, orchestrator, CLI) catch ``LLMError``; the subclasses say
whether retrying later, fixing configuration or re-prompting can help.
"""

from __future__ import annotations

from stark_mcp.errors import StarkError


class LLMError(StarkError):
    """Any expected failure of the LLM layer (bad configuration, empty script, ...)."""


class MissingAPIKey(LLMError):
    """No credential for the Anthropic API was found."""


class LLMCallFailed(LLMError):
    """The provider refused or failed the call after all retries.

    ``status_code`` is the HTTP status when there was one (None for timeouts and
    connection failures); ``error_type`` is the API's error type (``overloaded_error``,
    ``authentication_error``, ...) when the body named one.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, error_type: str | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_type = error_type


class LLMOutputError(LLMError):
    """The call succeeded but the reply is unusable (e.g. structured output that is not valid JSON)."""

    def __init__(self, message: str, *, text: str = "", stop_reason: str | None = None) -> None:
        super().__init__(message)
        self.text = text
        self.stop_reason = stop_reason
