"""Length-prefixed JSON frames over a file descriptor (setup, errors and results; never per-call traffic).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON holding one object. The
reader enforces a size limit and a deadline, and anything that is not a JSON object is a
``FrameError``: whoever reads frames from an untrusted process turns that into a verdict, never a
crash. Standard library only.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 20
FRAME_STALL_S = 30.0  # a started frame's bytes may arrive this far apart before the peer is given up on


class FrameError(Exception):
    """The peer sent bytes that are not a valid frame (or closed the stream inside one)."""


class FrameTimeout(Exception):
    """No frame began before the deadline (nothing of the stream was consumed)."""


def send(fd: int, obj: dict[str, Any]) -> None:
    data = json.dumps(obj, separators=(",", ":"), allow_nan=True).encode()
    if len(data) > MAX_FRAME:
        raise ValueError(f"frame of {len(data)} bytes exceeds {MAX_FRAME}")
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, n: int, deadline: float | None, started: bool) -> bytes | None:
    """``n`` bytes, or None at a clean end of stream before the first byte of a frame.

    ``deadline`` bounds only the wait for a frame's first byte (``FrameTimeout``: nothing consumed,
    so the caller may simply wait again). Once a frame has started its bytes are read to the end or
    the peer is given up on (``FrameError``): a timeout that dropped half a frame would leave the
    next read inside it, taking JSON text for a length."""
    chunks: list[bytes] = []
    got = 0
    stall_by: float | None = time.monotonic() + FRAME_STALL_S if started else None
    while got < n:
        limit = deadline if stall_by is None else stall_by
        if limit is not None:
            remaining = limit - time.monotonic()
            if remaining <= 0:
                if stall_by is None:
                    raise FrameTimeout()
                raise FrameError(f"the peer stalled inside a frame for {FRAME_STALL_S:g} s")
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
        chunk = os.read(fd, n - got)
        if not chunk:
            if got == 0 and not started:
                return None
            raise FrameError("the stream ended inside a frame")
        chunks.append(chunk)
        got += len(chunk)
        if stall_by is None:
            stall_by = time.monotonic() + FRAME_STALL_S
    return b"".join(chunks)


def recv(fd: int, timeout: float | None = None, max_bytes: int = MAX_FRAME) -> dict[str, Any] | None:
    """The next frame as a dict, or None at end of stream. Raises FrameError, and FrameTimeout when no
    frame began within ``timeout`` (then nothing was read: calling again is safe)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    header = _read_exact(fd, _HEADER.size, deadline, started=False)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise FrameError(f"a frame of {size} bytes exceeds the limit of {max_bytes}")
    payload = _read_exact(fd, size, None, started=True)
    if payload is None:
        raise FrameError("the stream ended inside a frame")
    try:
        obj = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError(f"a frame must be a JSON object, got {type(obj).__name__}")
    return obj
