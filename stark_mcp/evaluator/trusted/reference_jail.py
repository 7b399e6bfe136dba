"""The worker's handle on one reference jail (``evaluator/reference/serve.py``): start it the way a
runner starts, ask it one request at a time, and never wait on it past a deadline.

The jail runs the problem's code only. A jail that dies or stops answering is ``ReferenceGone``
(with how it ended and the tail of its output), never a hang of the worker. Standard library and
torch only.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.common.reference_wire import Request
from stark_mcp.evaluator.sandbox.forked import INTERPRETER, ZygoteClient, ZygoteUnavailable
from stark_mcp.evaluator.sandbox.launch import Jail, JailSpec
from stark_mcp.evaluator.sandbox.levels import IsolationInfo
from stark_mcp.evaluator.trusted.runners import LogTail, describe_end

REFERENCE_MODULE = "stark_mcp.evaluator.reference.serve"


class ReferenceGone(Exception):
    """The jail died, or did not answer in time (and was ended)."""


class ReferenceJail:
    """One jailed process holding one problem. Not thread-safe: the worker asks from one thread."""

    def __init__(self) -> None:
        self.jail: Jail | None = None
        self.log: LogTail | None = None
        self._sock: socket.socket | None = None

    def start(self, spec: JailSpec, info: IsolationInfo, zygote: ZygoteClient | None = None) -> None:
        """Start the jail now (forked from ``zygote`` where it can, as runners are); it says hello
        once its interpreter is up, before the problem's code runs (``hello``)."""
        if zygote is not None:
            try:
                self._start(spec, info, zygote)
                return
            except ZygoteUnavailable as exc:
                print(f"stark-mcp: bubblewrap starts a reference jail the zygote could not: {exc}",
                      file=sys.stderr)
        self._start(spec, info, None)

    def _start(self, spec: JailSpec, info: IsolationInfo, zygote: ZygoteClient | None) -> None:
        ours, theirs = socket.socketpair()
        log_r, log_w = os.pipe()
        spec.argv = [*INTERPRETER, "-m", REFERENCE_MODULE, str(theirs.fileno())]
        try:
            self.jail = Jail.start(
                spec, info, pass_fds=(theirs.fileno(),), stdout=log_w, stderr=log_w, zygote=zygote
            )
        except BaseException:
            ours.close()
            os.close(log_r)
            raise
        finally:
            theirs.close()
            os.close(log_w)
        self._sock = ours
        self.log = LogTail(log_r)

    def hello(self, timeout: float) -> None:
        answer = self._answer(time.monotonic() + timeout, timeout)
        if answer.get("kind") != "hello":
            raise ReferenceGone(f"it began with {str(answer)[:200]} instead of a hello")

    # free-form answer: raw JSON from the jail (``reference_wire`` says what), checked where it is read
    def request(self, frame: Request, timeout: float, fds: tuple[int, ...] = ()) -> dict[str, Any]:
        """Send ``frame`` (then ``fds``, which the jail takes right after it) and wait for the answer."""
        if self._sock is None or not self.alive():
            raise ReferenceGone(self.death())
        try:
            frames.send(self._sock.fileno(), frame)
            if fds:
                socket.send_fds(self._sock, [b"F"], list(fds))
        except OSError:
            raise ReferenceGone(self.death()) from None
        return self._answer(time.monotonic() + timeout, timeout)

    def _answer(self, deadline: float, timeout: float) -> dict[str, Any]:  # free-form: raw JSON, as above
        assert self._sock is not None
        while True:
            wait = min(1.0, max(0.01, deadline - time.monotonic()))
            try:
                frame = frames.recv(self._sock.fileno(), timeout=wait)
            except frames.FrameTimeout:
                if not self.alive():
                    raise ReferenceGone(self.death()) from None
                if time.monotonic() > deadline:
                    self.close()
                    raise ReferenceGone(f"did not answer within {timeout:g} s and was stopped") from None
                continue
            except (OSError, frames.FrameError) as exc:
                self.close()
                raise ReferenceGone(f"broke its connection ({exc}); {self.death()}") from None
            if frame is None:
                raise ReferenceGone(self.death())
            return frame

    def alive(self) -> bool:
        return self.jail is not None and self.jail.poll() is None

    def death(self) -> str:
        return describe_end(self.jail)

    def output(self, limit: int = 1500) -> str:
        return self.log.text(limit) if self.log is not None else ""

    def close(self) -> None:
        """End the jail (and everything in it); idempotent."""
        if self.jail is not None:
            self.jail.close()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.log is not None:
            self.log.thread.join(2)
