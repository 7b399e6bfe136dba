"""A local stand-in for the Anthropic Messages API, for testing the real SDK path.

A Starlette app under uvicorn on 127.0.0.1 (free port) in a daemon thread. Tests
queue actions (a reply, an HTTP failure, a stall, a stream that breaks with an
error event); each POST /v1/messages takes the next one and is recorded. A reply
is served as JSON, or as the SSE event sequence the SDK's stream accumulator
reads when the request asked to stream. The server stops itself after
``lifetime_s`` in case a test run forgets it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Reply:
    content: list[dict[str, Any]]
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read: int = 0
    cache_write: int = 0
    stop_reason: str = "end_turn"
    model: str | None = None  # default: echo the requested model


@dataclass
class Fail:
    status: int
    error_type: str
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Stall:
    seconds: float


@dataclass
class StreamError:
    error_type: str = "overloaded_error"


Action = Reply | Fail | Stall | StreamError


@dataclass
class Seen:
    headers: dict[str, str]
    body: dict[str, Any]


def text_reply(text: str, **kwargs: Any) -> Reply:
    return Reply(content=[{"type": "text", "text": text}], **kwargs)


class FakeAnthropic:
    def __init__(self, lifetime_s: float = 120.0) -> None:
        self.actions: deque[Action] = deque()
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._deadline = threading.Timer(lifetime_s, self.stop)
        self._deadline.daemon = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeAnthropic:
        self._thread.start()
        self._deadline.start()
        give_up = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > give_up or not self._thread.is_alive():
                raise RuntimeError("fake Anthropic server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._deadline.cancel()
        self._server.should_exit = True
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def reset(self) -> None:
        with self._lock:
            self.actions.clear()
            self.requests.clear()

    def queue(self, *actions: Action) -> None:
        with self._lock:
            self.actions.extend(actions)

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.requests.append(Seen(headers=dict(request.headers), body=body))
            action = self.actions.popleft() if self.actions else None
        if action is None:
            # Fail loudly and tell the SDK not to retry: the test forgot to queue a reply.
            return _error(500, "api_error", "fake server: nothing queued", {"x-should-retry": "false"})
        if isinstance(action, Stall):
            await anyio.sleep(action.seconds)
            return _error(500, "api_error", "stalled", {"x-should-retry": "false"})
        if isinstance(action, Fail):
            return _error(action.status, action.error_type, action.message, action.headers)
        model = body.get("model", "unknown")
        if isinstance(action, StreamError):
            return _sse(_broken_stream(model, action.error_type))
        if body.get("stream"):
            return _sse(_stream_events(action, model))
        return JSONResponse(_message_json(action, model))


def _error(status: int, error_type: str, message: str, headers: dict[str, str]) -> JSONResponse:
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def _usage(reply: Reply, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": reply.cache_read,
        "cache_creation_input_tokens": reply.cache_write,
    }


def _message_json(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": reply.model or model,
        "content": reply.content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": _usage(reply, reply.output_tokens),
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _sse(events: list[bytes]) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for chunk in events:
            yield chunk

    return StreamingResponse(body(), media_type="text/event-stream")


def _stream_events(reply: Reply, model: str) -> list[bytes]:
    start = _message_json(reply, model) | {"content": [], "stop_reason": None}
    start["usage"] = _usage(reply, 1)
    events = [_event("message_start", {"type": "message_start", "message": start})]
    events.append(_event("ping", {"type": "ping"}))
    for index, block in enumerate(reply.content):
        events.extend(_block_events(index, block))
    events.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": reply.output_tokens},
            },
        )
    )
    events.append(_event("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: dict[str, Any]) -> list[bytes]:
    if block["type"] == "text":
        text = block["text"]
        half = len(text) // 2
        opening = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in (text[:half], text[half:]) if part]
    elif block["type"] == "thinking":
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": block["thinking"]},
            {"type": "signature_delta", "signature": block.get("signature", "sig")},
        ]
    else:
        raise ValueError(f"fake server cannot stream a {block['type']} block")
    events = [
        _event(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        )
    ]
    events += [
        _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        for delta in deltas
    ]
    events.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _broken_stream(model: str, error_type: str) -> list[bytes]:
    partial = Reply(content=[{"type": "text", "text": "partial answer"}])
    head = _stream_events(partial, model)[:4]  # message_start, ping, content_block_start, first delta
    error = {"type": "error", "error": {"type": error_type, "message": "overloaded mid-stream"}}
    return head + [_event("error", error)]
