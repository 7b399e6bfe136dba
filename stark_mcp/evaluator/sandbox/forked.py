"""The client side of the forked launcher (``zygote.py``): start it, ask it for workers and jails,
follow them.

The evaluating process has one zygote (``process_zygote``) and asks it for workers; each worker
reaches it through the connection it was forked with (``ZygoteClient.connect``) and asks it for its
runners' jails. ``ZygoteClient.start`` returns at once; the zygote imports torch in the background
and the first request waits for it. What it started is a ``ForkedProcess``: ``pid``, ``poll()`` and
``wait()`` as on a ``subprocess.Popen``, fed by the exit frames the zygote sends. Standard library
only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.jail_command import ForkRequest

READY_TIMEOUT_S = 180.0  # importing torch on a loaded 2-core machine
REPLY_TIMEOUT_S = 60.0
ZYGOTE_MODULE = "stark_mcp.evaluator.sandbox.zygote"
# How the zygote's children run a module: the interpreter and flags every runner is started with.
INTERPRETER = (sys.executable, "-P", "-X", "faulthandler")
ZYGOTE_FD_ARG = "--zygote-fd="  # the last argument of a worker the zygote forked: its connection
GONE = -9  # the code of a jail whose zygote died (its PID namespace died with it)


class ZygoteUnavailable(RuntimeError):
    """The zygote could not start a jail (it died, never became ready, or a setup step failed)."""


class ZygoteClient:
    def __init__(self, sock: socket.socket, proc: subprocess.Popen[bytes] | None = None) -> None:
        self.proc, self.sock = proc, sock
        self.ready = threading.Event()
        self.closed = threading.Event()
        # free-form: the zygote's frames, read as they come
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self.exits: dict[int, int] = {}
        self.changed = threading.Condition()
        self.lock = threading.Lock()  # one request at a time
        self.failure: str | None = None  # why a jail could not be set up: later ones go to bubblewrap
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @classmethod
    def start(cls, env: dict[str, str], preload: tuple[str, ...] = ()) -> ZygoteClient:
        """A zygote of this process's own; ``preload``: modules it imports besides its own list."""
        ours, theirs = socket.socketpair()
        try:
            proc = _SPAWNER.popen(
                [*INTERPRETER, "-m", ZYGOTE_MODULE, str(theirs.fileno()), *preload],
                env=env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise ZygoteUnavailable(f"cannot start the zygote: {exc}") from None
        finally:
            theirs.close()
        return cls(ours, proc)

    @classmethod
    def connect(cls, fd: int) -> ZygoteClient:
        """A worker's client, on the connection the zygote forked it with."""
        return cls(socket.socket(fileno=fd))

    def runs(self, argv: list[str]) -> tuple[str, list[str]] | None:
        """(module, args) when ``argv`` is a module run the way the zygote's children run one."""
        head = list(INTERPRETER) + ["-m"]
        if len(argv) > len(head) and argv[: len(head)] == head:
            return argv[len(head)], argv[len(head) + 1 :]
        return None

    def alive(self) -> bool:
        started = self.proc is None or self.proc.poll() is None
        return self.failure is None and not self.closed.is_set() and started

    def _read(self) -> None:
        try:
            while True:
                frame = frames.recv(self.sock.fileno())
                if frame is None:
                    break
                kind = frame.get("kind")
                if kind == "ready":
                    self.ready.set()
                elif kind == "exit":
                    with self.changed:
                        self.exits[int(frame["pid"])] = int(frame["code"])
                        self.changed.notify_all()
                else:
                    self.replies.put(frame)
        except (OSError, frames.FrameError, ValueError, KeyError):
            pass
        finally:
            self.closed.set()
            self.ready.set()
            self.replies.put({"kind": "error", "message": "the zygote is gone"})
            with self.changed:
                self.changed.notify_all()

    def start_jail(self, request: ForkRequest, fds: list[int]) -> ForkedProcess:
        """Fork a jail; ``fds`` are stdout, stderr, then the descriptors for ``request['fd_targets']``.
        A jail that cannot be built makes this client unusable (``alive``): later ones go elsewhere."""
        return self._start({**request, "kind": "jail"}, fds, remember_failure=True)

    def start_worker(
        self, module: str, args: list[str], env: dict[str, str], fds: list[int], targets: list[int]
    ) -> ForkedProcess:
        """Fork a trusted worker running ``module``; ``{zygote_fd}`` in ``args`` becomes the number of
        its own connection to the zygote. ``fds``: stdout, stderr, then one per ``targets`` number."""
        request = {"kind": "worker", "module": module, "args": args, "env": env, "fd_targets": targets}
        return self._start(request, fds, remember_failure=False)

    def _start(self, request: ForkRequest, fds: list[int], remember_failure: bool) -> ForkedProcess:
        with self.lock:
            if not self.ready.wait(READY_TIMEOUT_S) or self.closed.is_set():
                raise ZygoteUnavailable("the zygote did not become ready")
            try:
                socket.send_fds(self.sock, [b"J"], fds)
                frames.send(self.sock.fileno(), request)
            except OSError as exc:
                raise ZygoteUnavailable(f"the zygote is gone: {exc}") from None
            try:
                reply = self.replies.get(timeout=REPLY_TIMEOUT_S)
            except queue.Empty:
                self.closed.set()  # a late answer would be taken for the next request's
                raise ZygoteUnavailable("the zygote did not answer") from None
        if reply.get("kind") != "started":
            message = str(reply.get("message", reply))
            if remember_failure:
                self.failure = message
            raise ZygoteUnavailable(message)
        return ForkedProcess(self, int(reply["pid"]))

    def exit_of(self, pid: int, timeout: float | None) -> int | None:
        with self.changed:
            self.changed.wait_for(lambda: pid in self.exits or self.closed.is_set(), timeout)
            if pid in self.exits:
                return self.exits.pop(pid)
            return GONE if self.closed.is_set() else None

    def close(self) -> None:
        """Hang up: the zygote kills what this connection asked for (and, for its parent, exits)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
                self.proc.wait(5)
        self.reader.join(5)


class _Spawner:
    """Starts processes from one thread that lives as long as this process. The zygote asks the
    kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``), and the kernel's parent is the
    thread that started it, not the process: a zygote started from a pool's thread was killed, with
    every jail and worker forked from it, when that thread ended (an event loop's default executor
    shut down at the loop's end, while the process and its shared zygote went on: a later
    evaluation in the process then found it dying). Started on first use; a daemon thread, so it
    never holds the interpreter's exit (the zygote then sees its connection close and ends)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.pid = 0

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        done: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
        with self.lock:
            if self.thread is None or self.pid != os.getpid():  # none yet, or a forked copy of us
                self.jobs = queue.Queue()
                self.thread = threading.Thread(
                    target=self._serve, args=(self.jobs,), name="stark-spawner", daemon=True
                )
                self.pid = os.getpid()
                self.thread.start()
            jobs = self.jobs
            jobs.put((lambda: subprocess.Popen(argv, **kwargs), done))
        ok, value = done.get()
        if not ok:
            raise value
        return value

    @staticmethod
    def _serve(jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]]) -> None:
        while True:
            job, done = jobs.get()
            try:
                done.put((True, job()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                done.put((False, exc))


_SPAWNER = _Spawner()
_process_zygote: tuple[int, ZygoteClient] | None = None
_process_lock = threading.Lock()


def process_zygote(env: dict[str, str]) -> ZygoteClient | None:
    """This process's zygote, started on first use (and again if it died), or None if it cannot be
    started. ``env`` is its environment: each child gets its own on top."""
    global _process_zygote
    with _process_lock:
        if _process_zygote is not None:
            pid, client = _process_zygote
            if pid == os.getpid() and client.alive():
                return client
            if pid == os.getpid():
                client.close()
            _process_zygote = None
        try:
            client = ZygoteClient.start(env)
        except ZygoteUnavailable:
            return None
        _process_zygote = (os.getpid(), client)
        return client


T = TypeVar("T")


async def zygote_first(start: Callable[[ZygoteClient | None], Awaitable[T]], what: str, fork: bool) -> T:
    """``start(zygote)`` with this process's zygote where ``fork`` allows it, else, or if the zygote
    cannot, ``start(None)`` (bubblewrap), saying so on stderr. ``start`` makes its descriptors and
    folders afresh on each call: a half-built jail may have written to the first ones."""
    zygote = process_zygote(scrub_env(os.environ, {})) if fork else None
    if zygote is not None:
        try:
            return await start(zygote)
        except ZygoteUnavailable as exc:
            print(f"stark-mcp: bubblewrap starts a {what} the zygote could not: {exc}", file=sys.stderr)
    return await start(None)


async def run_trusted_module(
    module: str, args: list[str], env: dict[str, str], timeout: float
) -> tuple[int, bytes, bytes] | None:
    """``python -m module args`` as trusted code forked from this process's zygote, which has torch
    imported already: (exit code, stdout, stderr), or None where the zygote cannot start it (the
    caller then starts a process). It runs in a session of its own, killed with everything it
    started when ``timeout`` passes (TimeoutError) or the caller is cancelled."""
    zygote = process_zygote(scrub_env(os.environ, {}))
    if zygote is None:
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = await asyncio.to_thread(zygote.start_worker, module, args, env, [out_w, err_w], [])
    except ZygoteUnavailable:
        os.close(out_r)
        os.close(err_r)
        return None
    finally:
        os.close(out_w)
        os.close(err_w)
    # Read on the event loop, not in threads: a header's making holds its pipes for a minute, and
    # the default executor's few threads serve every other blocking call of this process.
    reads = [asyncio.ensure_future(_read_all(fd)) for fd in (out_r, err_r)]
    try:
        async with asyncio.timeout(timeout):  # not wait_for: see workers._recv
            out, err = await asyncio.gather(*reads)
            while (code := proc.poll()) is None:  # its pipes closed: it is exiting
                await asyncio.sleep(0.01)
    except BaseException:
        # its session (the compilers it started too), and itself: the session is made just after the fork
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(proc.pid, signal.SIGKILL)
        await asyncio.shield(asyncio.gather(*reads, return_exceptions=True))  # the pipes close with it
        raise
    return int(code), out, err


async def _read_all(fd: int) -> bytes:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        return await reader.read()
    finally:
        transport.close()


class ForkedProcess:
    """A jail the zygote forked, as much of ``subprocess.Popen`` as ``Jail`` uses."""

    def __init__(self, zygote: ZygoteClient, pid: int) -> None:
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None:
            code = self.zygote.exit_of(self.pid, timeout)
            if code is None:
                if timeout == 0:
                    return None
                raise subprocess.TimeoutExpired([ZYGOTE_MODULE], timeout or 0)
            self.returncode = code
        return self.returncode
