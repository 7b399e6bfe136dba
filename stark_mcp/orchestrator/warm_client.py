"""The client side of the warm evaluator: find the compatible daemon, start one if none, hand it the
evaluation and relay what it says, as ``session.evaluate_candidate`` would have said it in-process.

The first eval with no daemon starts one and waits for it: the daemon's start (torch's import by its
zygote, the worker's start) is what an in-process eval pays anyway, and started first thing it runs
the same course; evaluating in-process while a daemon starts beside it would pay both on the same
cores. ``WarmEvaluatorUnavailable``: no daemon could take it (refused folder, a start that failed),
``WarmEvaluatorLost``: the daemon stopped mid-evaluation; the caller then evaluates in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from stark_mcp.config import VARIABLES, Settings
from stark_mcp.device import Device
from stark_mcp.evaluator import EvalSettings
from stark_mcp.orchestrator import warm_wire as wire
from stark_mcp.orchestrator.early_start import forks
from stark_mcp.orchestrator.errors import WarmEvaluationFailed, WarmEvaluatorLost, WarmEvaluatorUnavailable
from stark_mcp.orchestrator.warm_address import (
    InsecureFolder,
    WarmAddress,
    absolute,
    folder_path,
    secure_folder,
    warm_address,
)
from stark_mcp.problems import load_problem
from stark_mcp.progress import Progress
from stark_mcp.records import Evaluation, ProfileReport

T = TypeVar("T", bound=BaseModel)
START_TIMEOUT_S = 180.0  # the daemon's start: its imports, on a loaded 2-core machine
PEERCRED = struct.Struct("3i")
LOG_LIMIT = 4 * 1024 * 1024
SOCKET_PATH_MAX = 108  # sun_path, with its terminating NUL
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# The daemon runs this package (the one whose digest is in the key), whatever the client's sys.path.
LAUNCH = (
    f"import sys; sys.path.insert(0, {str(PACKAGE_ROOT)!r}); "
    "from stark_mcp.orchestrator.warm_evaluator import main; sys.exit(main())"
)


async def evaluate_warm(
    settings: Settings,
    problem: str,
    source: str,
    *,
    device: Device,
    eval_settings: EvalSettings,
    use_cache: bool = True,
    progress: Progress | None = None,
    on_result: Callable[[Evaluation], None] | None = None,
    wait_for_baselines: bool = True,
    profile: bool = False,
    on_profile: Callable[[ProfileReport], None] | None = None,
) -> Evaluation:
    """``session.evaluate_candidate`` by the warm evaluator compatible with this process, started if
    there is none; the same callbacks, the same records."""
    if not hasattr(socket, "SO_PEERCRED"):
        raise WarmEvaluatorUnavailable("this system cannot tell who is at a unix socket's end (SO_PEERCRED)")
    try:
        address = warm_address(settings)
    except InsecureFolder as exc:
        raise WarmEvaluatorUnavailable(str(exc)) from None
    if len(os.fsencode(address.socket)) >= SOCKET_PATH_MAX:
        raise WarmEvaluatorUnavailable(f"its socket's path {address.socket} is too long for a unix socket")
    loaded = load_problem(problem)
    request = wire.EvaluateRequest(
        key=address.key, problem=loaded.model_dump(mode="json"), source=source, device=device,
        eval_settings=eval_settings.model_dump(mode="json"), use_cache=use_cache,
        wait_for_baselines=wait_for_baselines, profile=profile,
    )
    try:
        reader, writer = await connect_or_start(address, settings)
    except OSError as exc:  # not the expected "nobody there": a folder or socket we cannot use
        raise WarmEvaluatorUnavailable(f"cannot reach or start it: {exc}") from None
    verdict: Evaluation | None = None
    try:
        try:
            writer.write(request.line())
            await writer.drain()
        except (ConnectionError, OSError) as exc:
            raise WarmEvaluatorLost(f"its connection broke ({exc})") from None
        while True:
            try:
                line = await reader.readline()
            except (ConnectionError, OSError, ValueError) as exc:
                raise WarmEvaluatorLost(f"its connection broke ({exc})", verdict) from None
            if not line.endswith(b"\n"):
                raise WarmEvaluatorLost(f"it closed the connection; its log: {address.log}", verdict)
            try:
                reply = wire.parse(wire.REPLY, line)
            except wire.BadMessage as exc:
                raise WarmEvaluatorLost(f"it answered what is no reply ({exc})", verdict) from None
            if isinstance(reply, wire.Progress):
                if progress is not None:
                    await progress(reply.done, reply.total, reply.message)
            elif isinstance(reply, wire.Verdict):
                verdict = record(Evaluation, reply.evaluation, verdict)
                if on_result is not None:
                    on_result(verdict)
            elif isinstance(reply, wire.Profile) and verdict is not None:
                report = record(ProfileReport, reply.report, verdict)
                verdict = verdict.model_copy(update={"profile": report})
                if on_profile is not None:
                    on_profile(report)
            elif isinstance(reply, wire.Done) and verdict is not None:
                return verdict
            elif isinstance(reply, wire.Failed):
                if reply.kind == "user":
                    raise WarmEvaluationFailed(reply.message)
                if reply.kind == "request":
                    raise WarmEvaluatorUnavailable(f"it refused the request: {reply.message}")
                raise WarmEvaluatorLost(f"it failed: {reply.message}; its log: {address.log}", verdict)
            else:
                raise WarmEvaluatorLost(f"it answered out of turn ({reply.op})", verdict)
    finally:
        writer.close()


def record(model: type[T], text: str, verdict: Evaluation | None) -> T:
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        what = f"its {model.__name__} did not parse: {exc.errors()[0]['msg']}"
        raise WarmEvaluatorLost(what, verdict) from None


async def connect(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the daemon at ``path``, whose process must be this user's."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=wire.MAX_LINE)
    sock = writer.get_extra_info("socket")
    _pid, uid, _gid = PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size))
    if uid != os.getuid():
        writer.close()
        raise WarmEvaluatorUnavailable(f"{path} is served by uid {uid}, not {os.getuid()}")
    return reader, writer


async def connect_or_start(
    address: WarmAddress, settings: Settings
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the daemon serving ``address``; with none listening (no socket, or a stale one
    left by a killed daemon), one is started, one client at a time (the start lock)."""
    with contextlib.suppress(FileNotFoundError, ConnectionRefusedError):
        return await connect(address.socket)
    fd = os.open(address.start_lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # another client starting one: wait for it, then use its daemon
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise WarmEvaluatorUnavailable("another eval took too long starting one") from None
                await asyncio.sleep(0.02)
        with contextlib.suppress(FileNotFoundError, ConnectionRefusedError):
            return await connect(address.socket)
        daemon = start_daemon(address, settings)
        while True:
            try:
                return await connect(address.socket)
            except (FileNotFoundError, ConnectionRefusedError):
                if daemon.poll() is not None:
                    raise WarmEvaluatorUnavailable(
                        f"it exited at its start (status {daemon.returncode}); its log: {address.log}"
                    ) from None
                if time.monotonic() > deadline:
                    raise WarmEvaluatorUnavailable(f"it did not start in {START_TIMEOUT_S:g} s") from None
                await asyncio.sleep(0.01)
    finally:
        os.close(fd)  # and the start lock with it


def start_daemon(address: WarmAddress, settings: Settings) -> subprocess.Popen[bytes]:
    """The daemon for ``address``: detached (its own session), its output appended to its log, in its
    folder, with this process's environment and its data paths made absolute."""
    resolved = absolute(settings)
    paths = {"home": resolved.home, "db_path": resolved.database, "cache_dir": resolved.cache,
             "toolchain_dir": resolved.toolchain}
    env = {**os.environ, **{VARIABLES[name]: str(path) for name, path in paths.items()}}
    argv = [sys.executable, "-c", LAUNCH, "--socket", str(address.socket), "--lock", str(address.lock),
            "--key", address.key]
    if forks(settings):
        argv.append("--zygote")
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(OSError):
        if address.log.stat().st_size > LOG_LIMIT:  # kept across daemons, not for ever
            flags |= os.O_TRUNC
    fd = os.open(address.log, flags, 0o600)
    try:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, cwd=address.folder, env=env,
            start_new_session=True, close_fds=True,
        )
    finally:
        os.close(fd)


# -- stark-mcp daemon status | stop -------------------------------------------------------------------
@dataclass(frozen=True)
class DaemonState:
    socket: Path
    status: wire.Status | None  # None: nobody answers there (a stale socket)
    compatible: bool  # serves this process's key


def warm_folder() -> Path:
    try:
        return secure_folder(folder_path())
    except InsecureFolder as exc:
        raise WarmEvaluatorUnavailable(str(exc)) from None


async def ask(path: Path, request: wire.Message, timeout: float = 10.0) -> wire.Message | None:
    try:
        reader, writer = await connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        return None
    try:
        writer.write(request.line())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        return wire.parse(wire.REPLY, line) if line.endswith(b"\n") else None
    except (TimeoutError, ConnectionError, OSError, wire.BadMessage):
        return None
    finally:
        writer.close()


async def daemons(settings: Settings) -> list[DaemonState]:
    """Every warm evaluator of this user (its socket in the folder), and whether it serves this key."""
    try:
        key = warm_address(settings).key
    except InsecureFolder as exc:
        raise WarmEvaluatorUnavailable(str(exc)) from None
    states = []
    for path in sorted(warm_folder().glob("eval-*.sock")):
        status = await ask(path, wire.StatusRequest())
        states.append(DaemonState(path, status if isinstance(status, wire.Status) else None,
                                  path.name == f"eval-{key}.sock"))
    return states


async def settle(path: Path, timeout: float = 900.0) -> int | None:
    """Wait until the daemon at ``path`` has finished its background work; the jobs it was running,
    or None if none answered."""
    reply = await ask(path, wire.SettleRequest(), timeout)
    return reply.jobs if isinstance(reply, wire.Settled) else None


async def stop(path: Path, wait_s: float = 30.0) -> int | None:
    """Stop the daemon at ``path`` and wait until it has exited: its lifetime lock is free, and then
    its process is gone (the daemon lets the lock go in its last ``finally``, before the interpreter's
    own teardown, which on a loaded machine outlived the lock: "stopped" then named a live process).
    Its pid, or None if none answered."""
    reply = await ask(path, wire.StopRequest())
    if not isinstance(reply, wire.Stopping):
        return None
    deadline = time.monotonic() + wait_s
    while not lock_free(path.with_suffix(".lock")) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    while not process_gone(reply.pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return reply.pid


def process_gone(pid: int) -> bool:
    """Whether ``pid`` has exited: no such process, or a zombie its parent has not reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: ours has exited and the pid was reused
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True


def lock_free(path: Path) -> bool:
    """Whether no daemon holds the lifetime lock at ``path``."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
