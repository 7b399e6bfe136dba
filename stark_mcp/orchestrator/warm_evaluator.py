"""The warm evaluator: a per-user daemon that keeps one evaluator open for ``stark-mcp eval``.

A fresh ``stark-mcp eval`` pays torch's import, a CUDA context and its workers' start before it can
evaluate (3-4 s on an H200); this process pays them once and serves later evals on warm workers,
as a server does for ``add_child``. ``warm_client.py`` starts it (detached, its own session, its
output in ``<folder>/eval-<key>.log``) and talks to it over ``<folder>/eval-<key>.sock``
(``warm_address.py`` says what the key holds and which folder). Started as

    python -c "...; main()" --socket S --lock L --key K [--zygote]

it first takes ``L`` (flock, held for its whole life: one daemon per key; a daemon killed with
SIGKILL leaves a socket nobody listens on, and the next one, holding the lock, replaces it), binds
the socket so clients can connect while it starts, starts its zygote if told to (before its own
imports, as ``early_start`` does in a CLI), then imports the evaluator and serves. Only this
module's top imports the standard library alone; the rest is imported once the zygote is on its way.

Each connection: the peer's uid checked (SO_PEERCRED), one typed request (``warm_wire.py``), then
the evaluation's progress, verdict, profile and ``Done``. A client that disconnects (Ctrl-C, killed)
cancels its evaluation. Evaluations of several clients run at once on the one evaluator, which
queues device work. With no client for ``Settings.eval_daemon_idle_s`` (``STARK_EVAL_DAEMON_IDLE_S``)
it exits, removing its socket; SIGTERM and ``stark-mcp daemon stop`` end it the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import socket
import struct
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from stark_mcp.config import Settings
    from stark_mcp.evaluator import EvalSettings
    from stark_mcp.evaluator.host.executor import Executor
    from stark_mcp.orchestrator.warm_wire import EvaluateRequest, Message

log = logging.getLogger("stark_mcp.warm_evaluator")

LOCK_WAIT_S = 30.0  # a daemon that is shutting down still holds the lock this long at most
REQUEST_TIMEOUT_S = 30.0  # a connection that sends no request line in this time is closed
LISTEN_BACKLOG = 64
PEERCRED = struct.Struct("3i")  # pid, uid, gid


def take_lock(path: Path) -> int | None:
    """The lifetime lock's descriptor, held; None if another daemon kept it for ``LOCK_WAIT_S``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


def listen(path: Path) -> socket.socket:
    """The daemon's socket, bound where a stale one may lie (the lock says nobody serves it)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(LISTEN_BACKLOG)
    return sock


def peer_uid(sock: socket.socket) -> tuple[int, int]:
    pid, uid, _gid = PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size))
    return pid, uid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stark-mcp warm evaluator")
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--lock", type=Path, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--zygote", action="store_true", help="fork evaluations from a zygote, started first")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    lock = take_lock(args.lock)
    if lock is None:
        log.info("another warm evaluator holds %s: not starting", args.lock)
        return 0
    listener = listen(args.socket)
    if args.zygote:
        from stark_mcp.evaluator.sandbox.env import scrub_env
        from stark_mcp.evaluator.sandbox.forked import process_zygote

        process_zygote(scrub_env(os.environ, {}))
    import asyncio

    try:
        return asyncio.run(serve(listener, args.key, args.socket))
    finally:
        # Still holding the lock: nobody else can have bound a socket here since.
        with contextlib.suppress(FileNotFoundError):
            args.socket.unlink()
        os.close(lock)


async def serve(listener: socket.socket, key: str, path: Path) -> int:
    from stark_mcp.config import Settings
    from stark_mcp.orchestrator.warm_address import absolute, compatibility_key

    settings = absolute(Settings.from_env())
    logging.getLogger().setLevel(min(logging.INFO, logging.getLevelName(settings.log_level)))
    own = compatibility_key(settings)
    if own != key:
        log.error("started for key %s but this process's key is %s (the code or environment changed "
                  "under the client): not serving", key, own)
        return 1
    daemon = WarmEvaluator(settings, key, path)
    return await daemon.run(listener)


class WarmEvaluator:
    """The serving loop's state: the evaluators by settings, the clients being served, the idle clock."""

    def __init__(self, settings: Settings, key: str, path: Path) -> None:
        import asyncio

        self.settings = settings
        self.key = key
        self.path = path
        self.started = time.time()
        self.active = 0
        self.served = 0
        self.last_seen = time.monotonic()
        self.stopping = asyncio.Event()
        self._evaluators: dict[str, Executor] = {}
        self._opening = asyncio.Lock()
        self._work: set[asyncio.Task[None]] = set()
        self._stack = contextlib.AsyncExitStack()

    async def run(self, listener: socket.socket) -> int:
        import asyncio
        import signal

        from stark_mcp.orchestrator.warm_wire import MAX_LINE

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopping.set)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.chdir(self.path.parent)  # no client's directory kept busy
        server = await asyncio.start_unix_server(self.handle, sock=listener, limit=MAX_LINE)
        log.info("serving key %s as pid %d (idle timeout %g s)", self.key, os.getpid(),
                 self.settings.eval_daemon_idle_s)
        async with self._stack:
            watch = asyncio.create_task(self._idle_watch())
            await self.stopping.wait()
            watch.cancel()
            server.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()  # new clients start another daemon, which waits for this one's lock
            log.info("stopping (served %d evaluations, cancelling %d)", self.served, len(self._work))
            for task in list(self._work):  # their clients see the connection close and evaluate themselves
                task.cancel()
            await asyncio.gather(*self._work, return_exceptions=True)
        return 0

    async def _idle_watch(self) -> None:
        import asyncio

        idle = self.settings.eval_daemon_idle_s
        while True:
            await asyncio.sleep(min(1.0, idle / 4))
            if self.active == 0 and time.monotonic() - self.last_seen >= idle:
                # background work (a precompiled header) is finished first, as an in-process eval
                # finished it; a client arriving meanwhile keeps the daemon
                if await self.settle():
                    continue
                log.info("idle for %g s: exiting", idle)
                self.stopping.set()
                return

    async def evaluator(self, eval_settings: EvalSettings) -> Executor:
        """The evaluator for these evaluator settings, opened on first use and kept."""
        from stark_mcp.orchestrator.session import open_evaluator

        which = eval_settings.model_dump_json()
        async with self._opening:
            if which not in self._evaluators:
                self._evaluators[which] = await self._stack.enter_async_context(
                    open_evaluator(self.settings, eval_settings)
                )
            return self._evaluators[which]

    async def settle(self) -> int:
        """Wait for every evaluator's background work; how many jobs were running."""
        jobs = []
        for evaluator in list(self._evaluators.values()):
            await evaluator.settle(jobs.append)
        return sum(jobs)

    # -- one connection ----------------------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import asyncio

        from stark_mcp.orchestrator import warm_wire as wire

        self.last_seen = time.monotonic()
        try:
            pid, uid = peer_uid(writer.get_extra_info("socket"))
            if uid != os.getuid():
                log.warning("refused a connection from uid %d (pid %d)", uid, pid)
                return
            try:
                line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
            except ValueError:
                await self.send(writer, wire.Failed(kind="request", message=f"bad request: longer than "
                                                    f"{wire.MAX_LINE} bytes"))
                return
            if not line.endswith(b"\n"):
                return
            try:
                request = wire.parse(wire.REQUEST, line)
            except wire.BadMessage as exc:
                log.warning("bad request from pid %d: %s", pid, exc)
                await self.send(writer, wire.Failed(kind="request", message=f"bad request: {exc}"))
                return
            if isinstance(request, wire.StatusRequest):
                await self.send(writer, wire.Status(
                    pid=os.getpid(), key=self.key, started=self.started,
                    idle_timeout_s=self.settings.eval_daemon_idle_s, active=self.active, served=self.served,
                    log=str(self.path.with_suffix(".log")),
                ))
            elif isinstance(request, wire.StopRequest):
                await self.send(writer, wire.Stopping(pid=os.getpid()))
                self.stopping.set()
            elif isinstance(request, wire.SettleRequest):
                await self.send(writer, wire.Settled(jobs=await self.settle()))
            else:
                await self.evaluate(request, reader, writer, pid)
        except (TimeoutError, ConnectionError, OSError) as exc:
            log.info("connection ended: %s", exc or type(exc).__name__)
        finally:
            self.last_seen = time.monotonic()
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def evaluate(
        self, request: EvaluateRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pid: int
    ) -> None:
        import asyncio

        from pydantic import ValidationError

        from stark_mcp.evaluator import EvalSettings
        from stark_mcp.orchestrator import warm_wire as wire
        from stark_mcp.problems import Problem

        if request.key != self.key:
            await self.send(writer, wire.Failed(kind="request", message=f"this warm evaluator serves key "
                                                f"{self.key}, not {request.key}"))
            return
        try:
            problem = Problem.model_validate(request.problem)
            eval_settings = EvalSettings.model_validate(request.eval_settings)
        except ValidationError as exc:
            message = f"bad request: {exc.errors()[0]['msg']}"
            await self.send(writer, wire.Failed(kind="request", message=message))
            return
        self.active += 1
        started = time.monotonic()
        work = asyncio.create_task(self._evaluate(request, problem, eval_settings, writer))
        self._work.add(work)
        work.add_done_callback(self._work.discard)
        gone = asyncio.create_task(reader.read(1))  # EOF (or anything more): the client has gone
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                log.info("client pid %d went away: cancelling its evaluation of %s", pid, problem.name)
                work.cancel()
            await asyncio.gather(work, return_exceptions=True)
        finally:
            gone.cancel()
            self.active -= 1
            self.served += 1
            log.info("pid %d: %s on %s in %.2f s", pid, problem.name, request.device,
                     time.monotonic() - started)

    async def _evaluate(
        self, request: EvaluateRequest, problem: Any, eval_settings: EvalSettings,
        writer: asyncio.StreamWriter,
    ) -> None:
        import asyncio

        from stark_mcp.errors import StarkError
        from stark_mcp.orchestrator import warm_wire as wire
        from stark_mcp.orchestrator.session import evaluate_on
        from stark_mcp.records import Evaluation, ProfileReport

        def relay(message: Message) -> None:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                writer.write(message.line())

        async def progress(done: float, total: float | None, message: str) -> None:
            relay(wire.Progress(done=done, total=total, message=message))
            with contextlib.suppress(ConnectionError, OSError):
                await writer.drain()

        def on_result(evaluation: Evaluation) -> None:
            served = evaluation.model_copy(update={"served_by": os.getpid()})
            relay(wire.Verdict(evaluation=served.model_dump_json()))

        def on_profile(report: ProfileReport) -> None:
            relay(wire.Profile(report=report.model_dump_json()))

        try:
            evaluator = await self.evaluator(eval_settings)
            await evaluate_on(
                evaluator, problem, request.source, device=request.device, eval_settings=eval_settings,
                use_cache=request.use_cache, progress=progress, on_result=on_result,
                wait_for_baselines=request.wait_for_baselines, profile=request.profile, on_profile=on_profile,
            )
            relay(wire.Done(served_by=os.getpid()))
        except asyncio.CancelledError:
            raise
        except StarkError as exc:
            relay(wire.Failed(kind="user", message=str(exc)))
        except Exception as exc:  # noqa: BLE001 - the client evaluates in-process and shows the traceback
            log.exception("evaluation failed")
            relay(wire.Failed(kind="internal", message=f"{type(exc).__name__}: {exc}"))
        with contextlib.suppress(ConnectionError, OSError):
            await writer.drain()

    async def send(self, writer: asyncio.StreamWriter, message: Message) -> None:
        writer.write(message.line())
        await writer.drain()


if __name__ == "__main__":
    sys.exit(main())
