"""The per-call handshake between the trusted worker and a runner: a shared page plus two doorbells.

The worker writes GO (sequence number, shape, slot, non-tensor arguments) into its half of a shared
memory block; the runner answers DONE (the same sequence number, the time it measured, a JSON
description of its outputs) in the other half. Each side spins on the other's sequence number for
a short while (microseconds matter when the trusted clock brackets a 50 us kernel), then sleeps on a
doorbell pipe. The worker treats everything in the runner's half as untrusted bytes: it copies them
once and validates them. Standard library only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import mmap
import os
import select
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stark_mcp.evaluator.common.runner_wire import Done

SIZE = 1 << 16
PROFILE = 1 << 31  # set in GO's slot: run this call once under the profiler, untimed and unchecked
EXIT = 1 << 30  # set in GO's slot: answer DONE and exit (a runner under an outside profiler or sanitizer)
_GO = struct.Struct("<QIII")  # seq, shape, slot, args_len       at 0
_GO_ARGS = 64
_GO_MAX = 4096 - _GO_ARGS
_DONE = struct.Struct("<QqI")  # seq, reported_ns, meta_len       at 4096
_DONE_AT = 4096
_DONE_META = _DONE_AT + 64
DONE_MAX = SIZE - _DONE_META


class ControlError(Exception):
    """The runner's half of the block holds something that is not a valid DONE."""


class WaitTimeout(Exception):
    pass


class PeerGone(Exception):
    pass


def shared_memory(name: str, nbytes: int) -> int:
    """A memfd of ``nbytes`` whose size nobody can change once it exists.

    Its descriptor is handed to a runner, which a candidate controls: a file it could shrink would
    make the worker's next access to its own mapping of it a SIGBUS (a candidate that truncated its
    regions took down the trusted worker, then every worker that retried its evaluation). Sealed
    against shrinking and growing, and against further seals (one that forbade writes would stop the
    worker's), it can still be written, and hole-punched, which only costs whoever touches it next."""
    fd = os.memfd_create(name, os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    os.ftruncate(fd, nbytes)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def create() -> tuple[mmap.mmap, int]:
    fd = shared_memory("stark-control", SIZE)
    return mmap.mmap(fd, SIZE), fd


def attach(fd: int) -> mmap.mmap:
    return mmap.mmap(fd, SIZE)


def ring(fd: int) -> None:
    """Wake the other side if it sleeps; a full pipe means it has wake-ups pending already."""
    try:
        os.write(fd, b"\x01")
    except BlockingIOError:
        pass
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def wait_for(
    current: Callable[[], int],
    target: int,
    bell: int,
    *,
    spin_s: float,
    timeout: float,
    alive: Callable[[], bool] | None = None,
) -> None:
    """Return once ``current() >= target``: spin for ``spin_s``, then sleep on ``bell``."""
    if current() >= target:
        return
    start = time.perf_counter()
    end_spin = start + spin_s
    while time.perf_counter() < end_spin:
        if current() >= target:
            return
    deadline = time.monotonic() + max(0.0, timeout - (time.perf_counter() - start))
    while True:
        _drain(bell)
        if current() >= target:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout()
        select.select([bell], [], [], min(remaining, 0.05))
        if current() >= target:
            return
        if alive is not None and not alive():
            if current() >= target:
                return
            raise PeerGone()


class WorkerSide:
    """The worker's view: writes GO, reads DONE (validated)."""

    def __init__(self, block: mmap.mmap) -> None:
        self.block = block

    def go(self, seq: int, shape: int, slot: int, args: list[Any]) -> None:
        data = json.dumps(args, separators=(",", ":")).encode()
        if len(data) > _GO_MAX:
            raise ValueError(f"non-tensor arguments take {len(data)} bytes; at most {_GO_MAX} fit")
        self.block[_GO_ARGS : _GO_ARGS + len(data)] = data
        _GO.pack_into(self.block, 0, seq, shape, slot, len(data))

    def done_seq(self) -> int:
        return struct.unpack_from("<Q", self.block, _DONE_AT)[0]

    # free-form: the runner's DONE metadata as it wrote it (``runner_wire.Done`` is what an honest one
    # writes); untrusted, so each field is checked where it is read
    def done(self, seq: int) -> tuple[int, dict[str, Any]]:
        """(reported ns, meta) of DONE ``seq``; ControlError when it is not well-formed."""
        raw = bytes(self.block[_DONE_AT:SIZE])  # one copy: the runner may keep writing
        got, reported, length = _DONE.unpack_from(raw, 0)
        if got != seq:
            raise ControlError(f"DONE for call {got}, expected {seq}")
        if not 0 <= length <= DONE_MAX:
            raise ControlError(f"DONE metadata length {length} out of range")
        try:
            meta = json.loads(raw[_DONE_META - _DONE_AT : _DONE_META - _DONE_AT + length].decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise ControlError(f"DONE metadata is not JSON: {exc}") from None
        if not isinstance(meta, dict):
            raise ControlError("DONE metadata must be a JSON object")
        return int(reported), meta


class RunnerSide:
    """The runner's view: reads GO, writes DONE."""

    def __init__(self, block: mmap.mmap) -> None:
        self.block = block

    def go_seq(self) -> int:
        return struct.unpack_from("<Q", self.block, 0)[0]

    def go(self) -> tuple[int, int, int, list[Any]]:
        seq, shape, slot, length = _GO.unpack_from(self.block, 0)
        args = json.loads(bytes(self.block[_GO_ARGS : _GO_ARGS + length]).decode()) if length else []
        return seq, shape, slot, args

    def done(self, seq: int, reported_ns: int, meta: Done) -> None:
        data = json.dumps(meta, separators=(",", ":"), allow_nan=True).encode()
        if len(data) > DONE_MAX:
            data = json.dumps(
                {
                    "ok": False,
                    "status": "runtime_error",
                    "reason": "exception",
                    "message": "the output description is too large",
                }
            ).encode()
        self.block[_DONE_META : _DONE_META + len(data)] = data
        struct.pack_into("<qI", self.block, _DONE_AT + 8, reported_ns, len(data))
        struct.pack_into("<Q", self.block, _DONE_AT, seq)


def nonblocking_pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    return r, w
