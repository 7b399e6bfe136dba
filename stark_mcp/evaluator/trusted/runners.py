"""The worker's handle on one sandboxed runner: start it, set it up, and time calls with our own clock.

A call, as the worker sees it (``RunnerHandle.call``), on a GPU:

    t0 | write the call's fresh inputs into the runner's slot | flush L2 | sync | GO
       | ... the runner computes, publishes, answers DONE ... | fence (GPU) | t1

``t1 - t0`` (the bracket) is ours: the runner cannot shorten it, because the inputs did not exist
before ``t0`` and whatever GPU work it leaves running delays our fence. Everything the runner says
(its own time, its output description) comes back as untrusted data for the session to check.
On the CPU the bracket is the CPU time the kernel accounted to the jail between GO and DONE.
Standard library and torch only.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from stark_mcp.evaluator.common import control, frames
from stark_mcp.evaluator.common.regions import Region
from stark_mcp.evaluator.common.runner_wire import RunnerSetup
from stark_mcp.evaluator.sandbox.forked import INTERPRETER, ZygoteClient, ZygoteUnavailable
from stark_mcp.evaluator.sandbox.launch import Jail, JailCpu, JailSpec
from stark_mcp.evaluator.sandbox.levels import IsolationInfo
from stark_mcp.evaluator.trusted.runner_memory import RunnerMemory, enable_credentials, sender_pid

RUNNER_MODULE = "stark_mcp.evaluator.untrusted.runner"
LOG_HEAD = 16 << 10
LOG_TAIL = 48 << 10


class RunnerDied(Exception):
    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class RunnerTimeout(Exception):
    pass


class LogTail:
    """Drains a pipe in a thread, keeping the head and the tail of what was written (bounded memory)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_bytes = 0
        self.total = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            with self.lock:
                self.total += len(chunk)
                if len(self.head) < LOG_HEAD:
                    take = LOG_HEAD - len(self.head)
                    self.head += chunk[:take]
                    chunk = chunk[take:]
                if chunk:
                    self.tail.append(chunk)
                    self.tail_bytes += len(chunk)
                    while self.tail_bytes - len(self.tail[0]) >= LOG_TAIL:
                        self.tail_bytes -= len(self.tail.popleft())
        os.close(self.fd)

    def text(self, limit: int = 6000) -> str:
        with self.lock:
            tail = b"".join(self.tail)[-LOG_TAIL:]
            head = bytes(self.head)
            total = self.total
        if total <= len(head) + len(tail) and len(head) + len(tail) <= limit:
            return (head + tail).decode("utf-8", "replace")
        keep_tail = tail[-(limit * 2 // 3) :] if tail else b""
        keep_head = head[: limit - len(keep_tail)]
        skipped = total - len(keep_head) - len(keep_tail)
        return (
            keep_head.decode("utf-8", "replace")
            + f"\n[... {skipped} bytes of output skipped ...]\n"
            + keep_tail.decode("utf-8", "replace")
        )


def describe_end(jail: Jail | None) -> str:
    """How a jail's process ended, in words (signal, exit code, or the OOM killer)."""
    if jail is None:
        return "never started"
    code = jail.wait(5)
    if jail.oom_killed():
        return "killed by the kernel's out-of-memory killer"
    if code is None:
        return "stopped answering"
    if code < 0 or code > 128:
        sig = -code if code < 0 else code - 128
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == signal.SIGKILL and not jail.killed_by_us:
            return "killed by SIGKILL from outside the evaluator (usually the kernel's out-of-memory killer)"
        if sig == signal.SIGXFSZ:
            return "killed by SIGXFSZ: it wrote a file past the sandbox's file size limit"
        return f"killed by {name}"
    return f"exited with code {code}"


@dataclass
class CallOutcome:
    bracket_ns: int  # the trusted measurement: wall time on a GPU, the jail's CPU time on the CPU
    reported_ns: int
    # free-form: the runner's DONE as it wrote it (``runner_wire.Done`` is an honest one's); untrusted,
    # each field is checked where it is read
    meta: dict[str, Any]
    wall_ns: int = 0


class RunnerHandle:
    """One runner process in its jail. Not thread-safe: the worker drives it from one thread."""

    def __init__(self, label: str, device: str, spin_s: float) -> None:
        self.label, self.device, self.spin_s = label, device, spin_s
        self.cuda = device.startswith("cuda")
        self.jail: Jail | None = None
        self.log: LogTail | None = None
        self.seq = 0
        self._fds: list[int] = []
        self.side: control.WorkerSide | None = None
        self.regions: dict[str, Region] = {}
        self.fence = torch.zeros(1, device=device) if self.cuda else None
        self._listener: socket.socket | None = None
        self._handover: list[int] = []
        self._cpu_mark: int | None = None  # jail CPU time when the previous call ended
        self.memory: RunnerMemory | None = None  # where CPU outputs are read from (by address)

    # -- start ---------------------------------------------------------------------------------------
    def start(
        self,
        spec: JailSpec,
        info: IsolationInfo,
        connect: tuple[str, str] | None = None,
        prefix: Sequence[str] = (),
        zygote: ZygoteClient | None = None,
    ) -> None:
        """Start the jail now; the runner imports torch and waits for its setup (a spare until then).

        ``prefix`` wraps the runner's command (a profiler or a sanitizer). Such a launcher may not
        pass inherited descriptors on, so with ``connect`` (the host path of a socket in a mount
        and the path the jail sees) the runner fetches them from that socket instead. With
        ``zygote``, a runner without a prefix is forked from it instead of started by bubblewrap,
        and started by bubblewrap after all, with descriptors of its own, if the zygote cannot."""
        if zygote is not None and connect is None and not prefix:
            try:
                self._start(spec, info, connect, prefix, zygote)
                return
            except ZygoteUnavailable as exc:
                print(f"stark-mcp: bubblewrap starts a runner the zygote could not: {exc}", file=sys.stderr)
        self._start(spec, info, connect, prefix, None)

    def _start(
        self,
        spec: JailSpec,
        info: IsolationInfo,
        connect: tuple[str, str] | None,
        prefix: Sequence[str],
        zygote: ZygoteClient | None,
    ) -> None:
        block, block_fd = control.create()
        self.side = control.WorkerSide(block)
        go_r, go_w = control.nonblocking_pipe()
        done_r, done_w = control.nonblocking_pipe()
        log_r, log_w = os.pipe()
        self.go_bell, self.done_bell = go_w, done_r
        runner = [*INTERPRETER, "-m", RUNNER_MODULE]
        if connect is None:
            ours, theirs = socket.socketpair()
            enable_credentials(ours)  # before the runner can say hello
            self._sock = ours
            child_fds = [theirs.fileno(), block_fd, go_r, done_w]
            spec.argv = [*prefix, *runner, *map(str, child_fds)]
            keep: list[int] = []
        else:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(connect[0])  # before the jail starts: its writable mounts are handed to its uid
            listener.listen(1)
            self._listener = listener
            theirs = None
            child_fds = []
            spec.argv = [*prefix, *runner, "--connect", connect[1]]
            keep = [block_fd, go_r, done_w]
        try:
            self.jail = Jail.start(
                spec, info, pass_fds=tuple(child_fds), stdout=log_w, stderr=log_w, zygote=zygote
            )
        except BaseException:
            for fd in (go_w, done_r, log_r):
                os.close(fd)
            if connect is None:
                self._sock.close()
            self._close_handover()
            raise
        finally:
            for fd in [fd for fd in (block_fd, go_r, done_w) if fd not in keep] + [log_w]:
                os.close(fd)
            if theirs is not None:
                theirs.close()
        self._handover = keep
        self.log = LogTail(log_r)
        self._fds = [go_w, done_r]

    def _accept(self, deadline: float) -> None:
        """A connecting runner: wait for it, then hand over its control block and doorbells."""
        listener = self._listener
        self._wait_readable(listener, deadline)
        conn, _ = listener.accept()
        try:
            enable_credentials(conn)  # before the handover: the runner says hello after it
            socket.send_fds(conn, [b"C"], self._handover)
        except OSError:
            conn.close()
            raise RunnerDied(self.death()) from None
        self._sock = conn
        self._close_handover()

    def _close_handover(self) -> None:
        for fd in self._handover:
            try:
                os.close(fd)
            except OSError:
                pass
        self._handover = []
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def setup(
        self, setup: RunnerSetup, regions: dict[str, tuple[Region, int]], timeout: float
    ) -> dict[str, Any]:  # free-form: the runner's raw answer (an honest one's: Ready or SetupError)
        """Hand over the shared regions (their fds travel over the socket) and the setup frame; return the
        runner's answer (``ready`` or ``error``)."""
        names = sorted(regions)
        self.regions = {k: regions[k][0] for k in names}
        setup = RunnerSetup(**setup)  # a copy, finished here
        setup["regions"] = {k: {"index": i, "nbytes": regions[k][0].size} for i, k in enumerate(names)}
        deadline = time.monotonic() + timeout
        if self._listener is not None:
            self._accept(deadline)
        pid = self._hello(deadline)
        if not self.cuda and pid is not None:
            self.memory = RunnerMemory.open(pid)
        setup["publish"] = "address" if self.memory is not None else "copy"
        try:
            socket.send_fds(self._sock, [b"R"], [regions[k][1] for k in names])
            frames.send(self._sock.fileno(), setup)
        except OSError:
            raise RunnerDied(self.death()) from None
        while True:
            try:
                frame = frames.recv(
                    self._sock.fileno(), timeout=min(1.0, max(0.01, deadline - time.monotonic()))
                )
            except OSError:  # the runner died and reset its end of the socket
                raise RunnerDied(self.death()) from None
            except frames.FrameTimeout:
                if not self.alive():
                    raise RunnerDied(self.death()) from None
                if time.monotonic() > deadline:
                    raise RunnerTimeout() from None
                continue
            if frame is None:
                raise RunnerDied(self.death())
            return frame

    def _hello(self, deadline: float) -> int | None:
        """Wait for the runner's hello (sent before it runs any candidate code); the kernel's word on
        which process sent it."""
        self._wait_readable(self._sock, deadline)
        try:
            return sender_pid(self._sock)
        except OSError:
            raise RunnerDied(self.death()) from None

    def _wait_readable(self, sock: socket.socket, deadline: float) -> None:
        """Until ``sock`` has something to read; RunnerDied or RunnerTimeout meanwhile."""
        while True:
            wait = min(0.2, max(0.01, deadline - time.monotonic()))
            if select.select([sock], [], [], wait)[0]:
                return
            if not self.alive():
                raise RunnerDied(self.death())
            if time.monotonic() > deadline:
                raise RunnerTimeout()

    # -- calls ---------------------------------------------------------------------------------------
    def call(
        self,
        shape: int,
        slot: int,
        args: list[Any],
        before: Callable[[], None],
        timeout: float,
        bracket_after_inputs: bool = False,
    ) -> CallOutcome:
        assert self.side is not None and self.jail is not None
        self.seq += 1
        t0 = time.perf_counter_ns()
        before()
        if bracket_after_inputs:
            t0 = time.perf_counter_ns()
        if self.cuda:
            cpu0 = None
        else:
            # Charge this call with everything the jail did since the previous call ended: work a
            # background thread finishes after DONE is not free (an honest runner idles at ~0 CPU).
            now = self.jail.cpu_ns()
            cpu0 = self._cpu_mark if self._cpu_mark is not None else now
        self.side.go(self.seq, shape, slot, args)
        control.ring(self.go_bell)
        try:
            control.wait_for(
                self.side.done_seq,
                self.seq,
                self.done_bell,
                spin_s=self.spin_s,
                timeout=timeout,
                alive=self.alive,
            )
        except control.PeerGone:
            raise RunnerDied(self.death()) from None
        except control.WaitTimeout:
            raise RunnerTimeout() from None
        if self.fence is not None:
            self.fence.add_(1)  # queued behind whatever GPU work the runner left running
            torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        reported, meta = self.side.done(self.seq)  # ControlError propagates: a channel verdict
        if cpu0 is not None:
            # On the CPU the trusted figure is CPU time: wake-up latency on a loaded machine does not
            # count, and work hidden in other threads or processes of the jail does.
            self._cpu_mark = self.jail.cpu_ns()
            return CallOutcome(self._cpu_mark - cpu0, reported, meta, t1 - t0)
        return CallOutcome(t1 - t0, reported, meta, t1 - t0)

    # -- life ----------------------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.jail is not None and self.jail.poll() is None

    def death(self) -> str:
        """How the runner ended, in words (signal, exit code, or the OOM killer)."""
        return describe_end(self.jail)

    def freeze(self) -> JailCpu | None:
        """Stop the jail; on the CPU, return its CPU time once stopped, as its cgroup and its live
        processes' clocks count it (None on a GPU, whose figure is wall time, or without a cgroup)."""
        if self.jail is None:
            return None
        self.jail.freeze()
        return None if self.cuda else self.jail.cpu_snapshot()

    @contextlib.contextmanager
    def held_still(self) -> Iterator[None]:
        """The jail frozen for a read of its outputs: no thread of it runs while we read, so none
        can see the read begin. Charges are left as they are (unlike ``thaw``): what the jail does
        after the read until the next GO is the next call's, as after any call."""
        frozen = self.jail is not None and self.jail.freeze()
        try:
            yield
        finally:
            if frozen and self.jail is not None and self.alive():
                self.jail.thaw()

    def restart_charges(self) -> None:
        """Charge the next call from its GO, not from the previous call's end. Done for every runner
        at the start of each timing block, so the two runners of a comparison are charged alike."""
        self._cpu_mark = None

    def thaw(self) -> None:
        if self.jail is not None:
            self.jail.thaw()
        # Waking a frozen jail costs its processes CPU time (each sleeping one returns to its sleep):
        # work of ours, not the candidate's, so the next call is charged from its GO only.
        self._cpu_mark = None

    def close(self) -> None:
        if self.jail is not None:
            self.jail.close()
        if self.memory is not None:
            self.memory.close()
            self.memory = None
        self._close_handover()
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        try:
            self._sock.close()
        except AttributeError:
            pass
        if self.log is not None:
            self.log.thread.join(2)
