"""A backend that replays queued replies: for tests and offline demos.

Replies are taken first from the queue of the request's role, then from the
shared queue, in order. Each request is kept in ``requests`` so a test can check
what the agents sent. Tokens are estimated at four characters per token so token
accounting downstream sees real numbers; no model is called, so replies cost
nothing unless a test passes a price table.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio.lowlevel
from pydantic import BaseModel, ConfigDict, ValidationError

from stark_mcp.llm.errors import LLMError
from stark_mcp.llm.pricing import PriceTable
from stark_mcp.llm.protocol import LLMReply, LLMRequest
from stark_mcp.llm.wire import parse_structured
from stark_mcp.records import Usage

ScriptedReply = str | LLMReply | BaseException | Callable[[LLMRequest], str | LLMReply]

def rough_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class ScriptedBackend:
    """``LLMBackend`` that answers from queues instead of a model."""

    name = "scripted"

    def __init__(
        self,
        replies: Iterable[ScriptedReply] = (),
        *,
        model: str = "scripted",
        prices: PriceTable | None = None,
    ) -> None:
        self.model = model
        self.prices = prices
        self.requests: list[LLMRequest] = []
        self._shared: deque[ScriptedReply] = deque(replies)
        self._by_role: dict[str, deque[ScriptedReply]] = {}

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: object) -> ScriptedBackend:
        backend = cls(**kwargs)  # type: ignore[arg-type]
        for role, text in load_scripted_replies(path):
            backend.enqueue(text, role=role)
        return backend

    def enqueue(self, *replies: ScriptedReply, role: str | None = None) -> None:
        """Queue replies for any role, or only for ``role`` when given."""
        queue = self._shared if role is None else self._by_role.setdefault(role, deque())
        queue.extend(replies)

    @property
    def pending(self) -> int:
        return len(self._shared) + sum(len(q) for q in self._by_role.values())

    async def complete(self, request: LLMRequest) -> LLMReply:
        await anyio.lowlevel.checkpoint()
        self.requests.append(request)
        item = self._next(request.role)
        if isinstance(item, BaseException) or (isinstance(item, type) and issubclass(item, BaseException)):
            raise item
        if callable(item):
            item = item(request)
        if isinstance(item, LLMReply):
            return item
        return self._reply(request, item)

    def _next(self, role: str) -> ScriptedReply:
        own = self._by_role.get(role)
        if own:
            return own.popleft()
        if self._shared:
            return self._shared.popleft()
        raise LLMError(f"scripted backend has no reply queued for role {role}")

    def _reply(self, request: LLMRequest, text: str) -> LLMReply:
        structured = parse_structured(text, "end_turn") if request.json_schema is not None else None
        usage = Usage(
            input_tokens=rough_tokens(request.system + request.prefix + request.body),
            output_tokens=rough_tokens(text),
            calls=1,
        )
        return LLMReply(
            text=text,
            structured=structured,
            usage=self.prices.priced(self.model, usage) if self.prices is not None else usage,
            model=self.model,
            stop_reason="end_turn",
        )


class _ReplyLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    role: str | None = None


def load_scripted_replies(path: str | Path) -> list[tuple[str | None, str]]:
    """``(role or None, text)`` pairs from a JSON list or a JSONL file.

    Each entry is either a string (a reply for any role) or an object
    ``{"text": "...", "role": "plan"}``.
    """
    path = Path(path)
    try:
        raw = path.read_text()
    except OSError as exc:
        raise LLMError(f"cannot read scripted replies {path}: {exc}") from exc
    try:
        if path.suffix == ".jsonl":
            entries = [json.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            entries = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LLMError(f"scripted replies {path} are not valid JSON: {exc}") from exc
    if not isinstance(entries, list):
        raise LLMError(f"scripted replies {path} must be a JSON list (or JSONL, one reply a line)")
    pairs: list[tuple[str | None, str]] = []
    for number, entry in enumerate(entries, start=1):
        try:
            line = _ReplyLine(text=entry) if isinstance(entry, str) else _ReplyLine.model_validate(entry)
        except ValidationError as exc:
            raise LLMError(
                f"scripted reply {number} in {path} is not a string or {{text, role}}: {exc}"
            ) from exc
        pairs.append((line.role, line.text))
    return pairs
