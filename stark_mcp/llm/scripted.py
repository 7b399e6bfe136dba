"""A backend that replays queued replies: for tests and offline demos.

Replies are taken first from the queue of the request's role, then from the
shared queue, in order. A reply may also be tied to one benchmark pair (``pair``):
``for_pair(id)`` gives that pair a view of the backend that takes its own replies
first, so pairs run side by side each get theirs whatever the interleaving. Each
request is kept in ``requests`` so a test can check what the agents sent. Tokens
are estimated at four characters per token so token accounting downstream sees
real numbers; no model is called, so replies cost nothing unless a test passes a
price table.
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
from stark_mcp.llm.protocol import LLMBackend, LLMReply, LLMRequest
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
        self._by_pair: dict[str, dict[str | None, deque[ScriptedReply]]] = {}  # pair -> role (None: any)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: object) -> ScriptedBackend:
        backend = cls(**kwargs)  # type: ignore[arg-type]
        for line in load_scripted_replies(path):
            backend.enqueue(line.text, role=line.role, pair=line.pair)
        return backend

    def enqueue(self, *replies: ScriptedReply, role: str | None = None, pair: str | None = None) -> None:
        """Queue replies for any role, or only for ``role`` when given; only for ``pair``'s view when
        given."""
        if pair is not None:
            queue = self._by_pair.setdefault(pair, {}).setdefault(role, deque())
        else:
            queue = self._shared if role is None else self._by_role.setdefault(role, deque())
        queue.extend(replies)

    @property
    def pending(self) -> int:
        scoped = sum(len(q) for queues in self._by_pair.values() for q in queues.values())
        return self.unscoped + scoped

    @property
    def unscoped(self) -> int:
        """Replies tied to no pair: whoever asks first gets them, so their order follows the requests'."""
        return len(self._shared) + sum(len(q) for q in self._by_role.values())

    def for_pair(self, pair_id: str) -> LLMBackend:
        """This backend as one benchmark pair sees it: its own replies first, then the untied ones."""
        return _PairView(self, pair_id)

    async def complete(self, request: LLMRequest) -> LLMReply:
        return await self._complete(request, None)

    async def _complete(self, request: LLMRequest, pair: str | None) -> LLMReply:
        await anyio.lowlevel.checkpoint()
        self.requests.append(request)
        item = self._next(request.role, pair)
        if isinstance(item, BaseException) or (isinstance(item, type) and issubclass(item, BaseException)):
            raise item
        if callable(item):
            item = item(request)
        if isinstance(item, LLMReply):
            return item
        return self._reply(request, item)

    def _next(self, role: str, pair: str | None) -> ScriptedReply:
        scoped = self._by_pair.get(pair, {}) if pair is not None else {}
        for queue in (scoped.get(role), scoped.get(None), self._by_role.get(role), self._shared):
            if queue:
                return queue.popleft()
        where = f" of pair {pair}" if pair is not None else ""
        raise LLMError(f"scripted backend has no reply queued for role {role}{where}")

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


class _PairView:
    """One benchmark pair's view of a ``ScriptedBackend`` (``for_pair``)."""

    name = "scripted"

    def __init__(self, parent: ScriptedBackend, pair: str) -> None:
        self.parent, self.pair = parent, pair

    @property
    def model(self) -> str:
        return self.parent.model

    async def complete(self, request: LLMRequest) -> LLMReply:
        return await self.parent._complete(request, self.pair)


class ScriptedLine(BaseModel):
    """One reply of a scripted file: for any role unless ``role``, any pair unless ``pair``."""

    model_config = ConfigDict(extra="forbid")

    text: str
    role: str | None = None
    pair: str | None = None


def load_scripted_replies(path: str | Path) -> list[ScriptedLine]:
    """The replies of a JSON list or a JSONL file.

    Each entry is either a string (a reply for any role) or an object
    ``{"text": "...", "role": "plan", "pair": "KEY:STRATEGY"}`` (``role`` and ``pair`` optional).
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
    lines: list[ScriptedLine] = []
    for number, entry in enumerate(entries, start=1):
        try:
            line = ScriptedLine(text=entry) if isinstance(entry, str) else ScriptedLine.model_validate(entry)
        except ValidationError as exc:
            raise LLMError(
                f"scripted reply {number} in {path} is not a string or {{text, role, pair}}: {exc}"
            ) from exc
        lines.append(line)
    return lines
