"""What a runner shares with the worker: frames over a real socket pair (a timeout never drops part of
a frame) and memory that cannot be resized under the worker.

The worker reads a runner's setup answer in one-second slices (to check between them that the runner
is alive). A frame whose length arrived in one slice and whose body arrived in the next was cut in
two: the next read took the body's first bytes (``{"ki``) for a length of 2 GB and the honest
candidate got ``runtime_error/channel``. These tests send the two halves of a frame on either side of
the reader's deadline, deterministically (the writer waits for the reader to have timed out)."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

from stark_mcp.evaluator.common import frames


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def encoded(obj: dict) -> tuple[bytes, bytes]:
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)), body


def test_a_frame_split_across_the_deadline_arrives_whole(pair) -> None:
    ours, theirs = pair
    header, body = encoded({"kind": "ready", "pad": "x" * 100})
    theirs.sendall(header + body[:5])
    sending_rest = threading.Event()

    def rest() -> None:
        threading.Event().wait(0.3)  # well past the reader's 0.05 s deadline
        sending_rest.set()  # before the bytes: once they arrive, the reader must see it set
        theirs.sendall(body[5:])

    threading.Thread(target=rest, daemon=True).start()
    assert frames.recv(ours.fileno(), timeout=0.05) == {"kind": "ready", "pad": "x" * 100}
    assert sending_rest.is_set()  # the whole frame came from waiting past the deadline


def test_a_frame_that_begins_after_a_timeout_is_read_by_the_next_call(pair) -> None:
    ours, theirs = pair
    with pytest.raises(frames.FrameTimeout):
        frames.recv(ours.fileno(), timeout=0.02)
    for obj in ({"kind": "first"}, {"kind": "second"}):
        header, body = encoded(obj)
        theirs.sendall(header + body)
    assert frames.recv(ours.fileno(), timeout=0.02) == {"kind": "first"}
    assert frames.recv(ours.fileno(), timeout=0.02) == {"kind": "second"}


def test_a_peer_stalling_inside_a_frame_is_a_frame_error(pair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frames, "FRAME_STALL_S", 0.2)
    ours, theirs = pair
    header, body = encoded({"kind": "ready"})
    theirs.sendall(header + body[:3])
    with pytest.raises(frames.FrameError, match="took more than"):
        frames.recv(ours.fileno(), timeout=5.0)


def test_a_peer_trickling_a_frame_cannot_hold_the_reader(pair, monkeypatch: pytest.MonkeyPatch) -> None:
    # A byte every 0.1 s never stalls for long, but the whole frame must arrive within the limit.
    monkeypatch.setattr(frames, "FRAME_STALL_S", 0.5)
    ours, theirs = pair
    header, body = encoded({"kind": "ready", "pad": "x" * 64})
    stop = threading.Event()

    def trickle() -> None:
        for byte in header + body:
            if stop.wait(0.1):
                return
            theirs.sendall(bytes([byte]))

    threading.Thread(target=trickle, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(frames.FrameError, match="took more than"):
        frames.recv(ours.fileno(), timeout=5.0)
    stop.set()
    assert time.monotonic() - started < 2.0


def test_a_stream_ending_inside_a_frame_is_a_frame_error(pair) -> None:
    ours, theirs = pair
    header, body = encoded({"kind": "ready"})
    theirs.sendall(header[:2])
    theirs.shutdown(socket.SHUT_WR)
    with pytest.raises(frames.FrameError, match="ended inside a frame"):
        frames.recv(ours.fileno(), timeout=1.0)


def test_shared_memory_handed_to_a_runner_cannot_be_resized_or_sealed_shut() -> None:
    import fcntl
    import mmap
    import os

    from stark_mcp.evaluator.common.control import shared_memory

    fd = shared_memory("stark-test", 1 << 16)
    try:
        mapping = mmap.mmap(fd, 1 << 16)  # the worker's own view, which must never fault
        for size in (0, 1 << 20):
            with pytest.raises(PermissionError):
                os.ftruncate(fd, size)
        with pytest.raises(PermissionError):
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        mapping[-1] = 7  # still writable, to the last byte
        assert os.fstat(fd).st_size == 1 << 16
        mapping.close()
    finally:
        os.close(fd)
