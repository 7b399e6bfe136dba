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
from collections.abc import Mapping
from typing import Any

_HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 20
FRAME_STALL_S = 30.0  # a frame must be whole this long after its first byte, or the peer is given up on


class FrameError(Exception):
    """The peer sent bytes that are not a valid frame (or closed the stream inside one)."""


class FrameTimeout(Exception):
    """No frame began before the deadline (nothing of the stream was consumed)."""


def send(fd: int, obj: Mapping[str, Any]) -> None:  # any protocol's frame (its records type it)
    data = json.dumps(obj, separators=(",", ":"), allow_nan=True).encode()
    if len(data) > MAX_FRAME:
        raise ValueError(f"frame of {len(data)} bytes exceeds {MAX_FRAME}")
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(
    fd: int, n: int, deadline: float | None, finish_by: float | None
) -> tuple[bytes | None, float | None]:
    """``n`` bytes (None at a clean end of stream before a frame's first byte), and the time by which
    the frame must be complete.

    ``deadline`` bounds only the wait for a frame's first byte (``FrameTimeout``: nothing consumed,
    so the caller may simply wait again). From that byte on, the whole frame has ``FRAME_STALL_S`` to
    arrive (``finish_by``), or the peer is given up on (``FrameError``): a timeout that dropped half a
    frame would leave the next read inside it, taking JSON text for a length, and a peer trickling a
    byte at a time must not hold the reader past any deadline."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        limit = deadline if finish_by is None else finish_by
        if limit is not None:
            remaining = limit - time.monotonic()
            if remaining <= 0:
                if finish_by is None:
                    raise FrameTimeout()
                raise FrameError(f"a frame took more than {FRAME_STALL_S:g} s to arrive")
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
        chunk = os.read(fd, n - got)
        if not chunk:
            if got == 0 and finish_by is None:
                return None, None
            raise FrameError("the stream ended inside a frame")
        if finish_by is None:
            finish_by = time.monotonic() + FRAME_STALL_S
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks), finish_by


# free-form: raw JSON off the pipe; the reader decodes it into its protocol's record
def recv(fd: int, timeout: float | None = None, max_bytes: int = MAX_FRAME) -> dict[str, Any] | None:
    """The next frame as a dict, or None at end of stream. Raises FrameError, and FrameTimeout when no
    frame began within ``timeout`` (then nothing was read: calling again is safe)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    header, finish_by = _read_exact(fd, _HEADER.size, deadline, None)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise FrameError(f"a frame of {size} bytes exceeds the limit of {max_bytes}")
    payload, _ = _read_exact(fd, size, None, finish_by)
    if payload is None:
        raise FrameError("the stream ended inside a frame")
    try:
        obj = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError(f"a frame must be a JSON object, got {type(obj).__name__}")
    return obj
