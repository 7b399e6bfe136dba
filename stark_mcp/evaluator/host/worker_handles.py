"""The parent's handle on a trusted worker process (one per device): start it, talk to it, restart it.

Commands are serialized per worker (the device's FIFO queue). Commands and answers are the records of
``common/wire.py``: the worker is trusted code, but every answer is still decoded and checked there,
and a worker that dies or sends garbage (an answer off the wire's schema included) is restarted and
the command reported as an ``WorkerCrashed`` for the service to retry. Cancelling a command kills
the worker (and with it every jail it started); the next command starts a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import struct
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.forked import (
    INTERPRETER,
    ZYGOTE_FD_ARG,
    ForkedProcess,
    ZygoteClient,
    ZygoteUnavailable,
    process_zygote,
)
from stark_mcp.evaluator.sandbox.levels import SandboxPolicy

WORKER_MODULE = "stark_mcp.evaluator.trusted.worker"
_HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20
START_TIMEOUT_S = 180.0


class WorkerCrashed(EvaluatorError):
    """The worker process died or misbehaved while serving a command."""


class ForkedWorker:
    """A worker the zygote forked, as much of ``asyncio.subprocess.Process`` as this file uses."""

    def __init__(self, proc: ForkedProcess) -> None:
        self._proc, self.pid = proc, proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    async def wait(self) -> int:
        while (code := self._proc.poll()) is None:
            await asyncio.sleep(0.02)
        return code


def _start_worker(zygote: ZygoteClient, request: tuple[Any, ...]) -> ForkedProcess:
    module, args, env, fds, targets = request
    try:
        return zygote.start_worker(module, args, env, fds, targets)
    finally:
        for fd in fds:
            os.close(fd)


def _kill_unclaimed(started: asyncio.Future[ForkedProcess]) -> None:
    if started.cancelled() or started.exception() is not None:
        return
    _kill_session(started.result().pid)


def _kill_session(pid: int) -> None:
    """A worker's session (every jail it started through bubblewrap), and the worker itself: a forked
    one makes its session just after the fork, so right after it the group may not exist yet."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


class WorkerClient:
    def __init__(
        self,
        device: str,
        gpu_index: int | None,
        hidden: list[str],
        policy: SandboxPolicy | None = None,
        tool_paths: ToolPaths | None = None,
    ) -> None:
        self.device, self.gpu_index, self.hidden = device, gpu_index, hidden
        self.policy = policy or SandboxPolicy()
        self.tool_paths = tool_paths or ToolPaths()
        self.lock = asyncio.Lock()
        self.proc: asyncio.subprocess.Process | ForkedWorker | None = None
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._in_w: int | None = None
        self._workdir: str | None = None
        self.loaded: dict[str, wire.Loaded] = {}
        self.hello: wire.Hello | None = None

    # -- process -------------------------------------------------------------------------------------
    async def _start(self) -> None:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        self._workdir = tempfile.mkdtemp(prefix="stark-worker-")
        os.chmod(self._workdir, 0o711)
        env = scrub_env(os.environ, {})
        if self.gpu_index is not None:
            env.update(CUDA_VISIBLE_DEVICES=str(self.gpu_index), CUDA_DEVICE_ORDER="PCI_BUS_ID")
        device = "cuda:0" if self.gpu_index is not None else "cpu"
        args = [
            str(in_r),
            str(out_w),
            device,
            self._workdir,
            str(self.gpu_index or 0),
            self.policy.to_json(),
            self.tool_paths.to_json(),
        ]
        try:
            zygote = process_zygote(scrub_env(os.environ, {})) if self.policy.fork else None
            if zygote is not None:
                self.proc = await self._fork(zygote, args, env, in_r, out_w)
            if self.proc is None:
                self.proc = await asyncio.create_subprocess_exec(
                    *INTERPRETER,
                    "-m",
                    WORKER_MODULE,
                    *args,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=None,
                    pass_fds=(in_r, out_w),
                    start_new_session=True,
                )
        finally:
            os.close(in_r)
            os.close(out_w)
        self._in_w = in_w
        loop = asyncio.get_running_loop()
        self._reader = asyncio.StreamReader(limit=MAX_FRAME)
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self._reader), os.fdopen(out_r, "rb", buffering=0)
        )
        frame = await self._recv(START_TIMEOUT_S)
        try:
            hello = wire.Hello.from_frame(frame) if frame is not None else None
        except wire.WireError as exc:
            hello, frame = None, f"{frame} ({exc})"
        if hello is None:
            await self.stop()
            raise EvaluatorError(f"the evaluator's worker for {self.device} did not start: {frame}")
        self.hello = hello
        self.loaded = {}

    async def _fork(
        self, zygote: ZygoteClient, args: list[str], env: dict[str, str], in_r: int, out_w: int
    ) -> ForkedWorker | None:
        """The worker forked from this process's zygote (torch already imported there), or None
        when the zygote cannot (it is then started from scratch, as without one).

        The request runs in a thread, which a cancelled caller cannot stop: the thread sends copies
        of the descriptors and closes them itself, and a worker it forks for a caller that has gone
        is killed (it would otherwise live on with nobody to stop it)."""
        # stderr: ours, as an exec'd worker inherits it
        fds = [os.open(os.devnull, os.O_WRONLY), os.dup(2), os.dup(in_r), os.dup(out_w)]
        request = (WORKER_MODULE, [*args, ZYGOTE_FD_ARG + "{zygote_fd}"], env, fds, [in_r, out_w])
        started = asyncio.ensure_future(asyncio.to_thread(_start_worker, zygote, request))
        try:
            proc = await asyncio.shield(started)
        except ZygoteUnavailable:
            return None
        except asyncio.CancelledError:
            started.add_done_callback(_kill_unclaimed)
            raise
        return ForkedWorker(proc)

    async def stop(self) -> None:
        if self.proc is not None:
            _kill_session(self.proc.pid)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await self.proc.wait()
        if self._transport is not None:
            self._transport.close()
        if self._in_w is not None:
            try:
                os.close(self._in_w)
            except OSError:
                pass
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self.proc = self._reader = self._transport = self._in_w = self._workdir = None
        self.loaded = {}

    async def shutdown(self, grace: float = 5.0) -> None:
        """Ask the worker to close its jails and exit; kill it if it does not."""
        if self.proc is not None and self.proc.returncode is None and self._in_w is not None:
            try:
                self._send(wire.ShutdownCommand())
                async with asyncio.timeout(grace):
                    await self.proc.wait()
            except (TimeoutError, OSError):
                pass
        await self.stop()

    @property
    def isolation(self) -> tuple[str, str]:
        if self.hello is None:
            return "", ""
        return self.hello.isolation, self.hello.isolation_note

    # -- frames --------------------------------------------------------------------------------------
    def _send(self, command: wire.Command) -> None:
        assert self._in_w is not None
        data = json.dumps(command.to_frame()).encode()
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(self._in_w, view) :]

    # free-form: a frame off the pipe; common/wire.py decodes and checks it
    async def _recv(self, timeout: float | None) -> dict[str, Any] | None:
        assert self._reader is not None
        try:
            # Not asyncio.wait_for: on Python 3.11 it returns a read that completes on the turn a
            # cancel arrives and drops the cancel, and the worker then outlives its cancelled command.
            async with asyncio.timeout(timeout):
                header = await self._reader.readexactly(_HEADER.size)
            (size,) = _HEADER.unpack(header)
            if size > MAX_FRAME:
                raise WorkerCrashed(f"the worker sent a frame of {size} bytes")
            payload = await self._reader.readexactly(size)
        except asyncio.IncompleteReadError:
            return None
        try:
            frame = json.loads(payload)
        except ValueError as exc:
            raise WorkerCrashed(f"the worker sent a frame that is not JSON: {exc}") from None
        if not isinstance(frame, dict):
            raise WorkerCrashed("the worker sent a frame that is not an object")
        return frame

    # -- commands ------------------------------------------------------------------------------------
    async def command(
        self,
        frame: wire.Command,
        *,
        expect: set[type[wire.Answer]],
        timeout: float | None,
        on_progress: Callable[[wire.Progress], Awaitable[None]] | None = None,
        problem: wire.LoadCommand | None = None,
        timings: dict[str, float] | None = None,
    ) -> wire.Answer:
        """Send one command (loading its problem first if needed) and return the answer frame.

        ``timings`` receives ``queue`` (waiting for the device's earlier commands) and
        ``process_start`` (starting the worker and loading the problem, when that was needed)."""
        waited = time.monotonic()
        async with self.lock:
            started = time.monotonic()
            try:
                await self._ensure_started()
                if problem is not None:
                    answer = await self._load(problem)
                    if isinstance(answer, wire.ProblemError):
                        return answer
                if timings is not None:
                    timings["queue"] = timings.get("queue", 0.0) + started - waited
                    timings["process_start"] = timings.get("process_start", 0.0) + time.monotonic() - started
                self._send(frame)
                return await self._answer(expect, timeout, on_progress)
            except asyncio.CancelledError:
                await self.stop()  # kills the worker's session: every jail it started goes with it
                raise
            except WorkerCrashed:
                await self.stop()
                raise

    async def load(self, problem: wire.LoadCommand) -> wire.Loaded | wire.ProblemError:
        """Load a problem (import, reference, shapes, sizing): ``loaded`` or ``problem_error``."""
        async with self.lock:
            try:
                await self._ensure_started()
                return await self._load(problem)
            except (asyncio.CancelledError, WorkerCrashed):
                await self.stop()
                raise

    async def _ensure_started(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            await self.stop()
            await self._start()

    async def _load(self, problem: wire.LoadCommand) -> wire.Loaded | wire.ProblemError:
        if problem.key in self.loaded:
            return self.loaded[problem.key]
        self._send(dataclasses.replace(problem, hidden=list(self.hidden)))
        answer = await self._answer({wire.Loaded, wire.ProblemError}, None, None)
        if isinstance(answer, wire.Loaded):
            self.loaded[problem.key] = answer
        assert isinstance(answer, (wire.Loaded, wire.ProblemError))
        return answer

    async def _answer(
        self,
        expect: set[type[wire.Answer]],
        timeout: float | None,
        on_progress: Callable[[wire.Progress], Awaitable[None]] | None,
    ) -> wire.Answer:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                frame = await self._recv(remaining)
            except TimeoutError:
                raise WorkerCrashed("the worker did not answer in time") from None
            if frame is None:
                code = self.proc.returncode if self.proc else None
                raise WorkerCrashed(f"the worker exited (code {code}) while serving a command")
            try:
                answer = wire.decode_answer(frame)
            except wire.WireError as exc:
                raise WorkerCrashed(f"unexpected answer from the worker: {exc}: {str(frame)[:300]}") from None
            if isinstance(answer, wire.Progress):
                if on_progress is not None:
                    await on_progress(answer)
                continue
            if isinstance(answer, wire.InfraError):
                where = _last_frame(answer.traceback or "")
                message = answer.message[:1500]
                raise WorkerCrashed(f"{message} (at {where})" if where else message)
            if type(answer) in expect:
                return answer
            raise WorkerCrashed(f"unexpected answer from the worker: {str(frame)[:300]}")


def _last_frame(tb: str) -> str:
    """``file:line in function`` of a traceback's innermost frame: where the worker failed."""
    frames = [line.strip() for line in tb.splitlines() if line.strip().startswith('File "')]
    if not frames:
        return ""
    last = frames[-1]
    try:
        path = last.split('"')[1]
        rest = last.split('"', 2)[2]
    except IndexError:
        return last[:200]
    return f"{'/'.join(path.split('/')[-3:])}{rest.replace(', line ', ':').replace(', in ', ' in ')}"[:200]

