"""The agents: one model call per attempt, re-asked with the exact complaint when a reply is unusable.

Each agent returns what it produced plus every exchange (request, reply or error) it made,
so the caller can store them with the node for audit. Failures of the model call itself
(``LLMError``) propagate as they are, because they are the backend's and not the reply's;
they gain an ``exchanges`` attribute with the calls made up to the failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from stark_mcp.agents.errors import AgentError
from stark_mcp.agents.parsing import PlanReply, extract_source, parse_advice_reply, parse_plan_reply
from stark_mcp.agents.render import Prompt
from stark_mcp.llm import LLMBackend, LLMError, LLMReply, LLMRequest
from stark_mcp.records import Usage
from stark_mcp.tree import AnchorError

T = TypeVar("T")


class Exchange(BaseModel):
    """One model call: what was sent, what came back, and why it was rejected if it was."""

    role: str
    request: LLMRequest
    reply: LLMReply | None = None
    error: str | None = None


def total_usage(exchanges: list[Exchange]) -> Usage:
    """Tokens and cost of all the calls, for the node they produced."""
    usage = Usage()
    for exchange in exchanges:
        if exchange.reply is not None:
            usage = usage + exchange.reply.usage
    return usage


class _Agent:
    role: str = ""

    def __init__(self, backend: LLMBackend, *, max_attempts: int = 2, max_tokens: int | None = None) -> None:
        if max_attempts < 1:
            raise AgentError(f"max_attempts must be at least 1, got {max_attempts}")
        self.backend = backend
        self.max_attempts = max_attempts
        self.max_tokens = max_tokens

    def _check_role(self, prompt: Prompt) -> None:
        if prompt.role != self.role:
            raise AgentError(f"the {self.role} agent was given a {prompt.role} prompt")

    async def _ask(self, prompt: Prompt, parse: Callable[[LLMReply], T]) -> tuple[T, list[Exchange]]:
        """Call the model until ``parse`` accepts a reply, at most ``max_attempts`` times."""
        self._check_role(prompt)
        exchanges: list[Exchange] = []
        errors: list[str] = []
        for _ in range(self.max_attempts):
            current = prompt.with_retry(errors) if errors else prompt
            request = current.to_request(max_tokens=self.max_tokens)
            try:
                reply = await self.backend.complete(request)
            except LLMError as exc:
                # The rejected replies before the failure still cost tokens; keep them with the error.
                exchanges.append(Exchange(role=self.role, request=request, error=str(exc)))
                exc.exchanges = exchanges  # type: ignore[attr-defined]
                raise
            try:
                result = parse(reply)
            except (AgentError, AnchorError) as exc:
                error = str(exc)
                if reply.stop_reason == "max_tokens":
                    error += " (the reply hit the output token limit; be more concise)"
                exchanges.append(Exchange(role=self.role, request=request, reply=reply, error=error))
                errors.append(error)
                continue
            exchanges.append(Exchange(role=self.role, request=request, reply=reply))
            return result, exchanges
        raise AgentError(
            f"the {self.role} agent gave no usable reply in {self.max_attempts} attempt(s); "
            f"last problem: {errors[-1]}",
            exchanges,
        )


class PlanAgent(_Agent):
    """Proposes one optimization as advice plus the node's source with anchored spans
    (``anchored=False``, the no-anchors ablation: advice only)."""

    role = "plan"

    def __init__(
        self, backend: LLMBackend, *, max_attempts: int = 3, max_tokens: int | None = None,
        anchored: bool = True,
    ) -> None:
        super().__init__(backend, max_attempts=max_attempts, max_tokens=max_tokens)
        self.anchored = anchored

    async def run(self, prompt: Prompt, base_source: str) -> tuple[PlanReply, list[Exchange]]:
        if not self.anchored:
            return await self._ask(prompt, lambda reply: parse_advice_reply(reply.text))
        return await self._ask(prompt, lambda reply: parse_plan_reply(reply.text, base_source))


class _SourceAgent(_Agent):
    async def run(self, prompt: Prompt) -> tuple[str, list[Exchange]]:
        return await self._ask(prompt, lambda reply: extract_source(reply.text, reply.structured))


class CodeAgent(_SourceAgent):
    """Realizes a plan inside its spans and returns the full ModelNew source."""

    role = "code"


class DebugAgent(_SourceAgent):
    """Repairs a failing node from its logs; the caller keeps the node's plan on the fix."""

    role = "debug"


class GeneralistAgent(_SourceAgent):
    """The search-only baseline's single agent: improves a passing node or fixes a failing one."""

    role = "generalist"
