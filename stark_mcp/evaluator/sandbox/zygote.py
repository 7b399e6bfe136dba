"""The forked launcher: ``python -P -X faulthandler -m stark_mcp.evaluator.sandbox.zygote FD [MODULE...]``.

A trusted process that imports torch, the trusted worker's modules and the runner's once, then forks
what the evaluator would otherwise start as fresh interpreters that import torch again: on a small
machine those imports were most of the CPU a small evaluation used. One per evaluating process
(``forked.process_zygote``), it forks

- **workers** (trusted, no jail) on its parent's connection (SOCK_FD); each gets a connection of its
  own here, on which it asks for
- **runner jails**: each request becomes three processes, as under bubblewrap:

    zygote ── C: own session, joins the jail's cgroup, takes the limits, unshares the namespaces
              └── I: PID 1 of the new PID namespace: builds the root (enter.py), reaps, exits with R
                  └── R: the jail's uid, no capabilities, only its descriptors: runs ``module``

It runs no candidate code and holds no evaluation's data: it hears only requests (a module, its
arguments, an environment, descriptors and, for a jail, a mount plan, a uid, a cgroup), and answers
with pids and exit codes (128 + N for a signal) on the connection that asked. What a child inherits
is therefore what a fresh interpreter that imported the same modules would hold. It dies with its
parent; a worker and C die with it, I with C, everything in a jail with I (its PID namespace ends
with its init); and when a connection closes, whatever it asked for is killed. Standard library and
torch only.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import resource
import runpy
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
from typing import Any

from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.sandbox import enter
from stark_mcp.evaluator.sandbox.layout import MountStep

# What every child would import first: the trusted worker's modules, the reference jail's, the
# runner's and the builder's (torch with them).
PRELOAD = (
    "stark_mcp.evaluator.trusted.worker",
    "stark_mcp.evaluator.reference.serve",
    "stark_mcp.evaluator.untrusted.runner",
    "stark_mcp.evaluator.untrusted.builder",
)
SETUP_TIMEOUT_S = 30.0  # from the fork to the jailed process about to run its module
MAX_FDS = 16
_LIMITS = {"nproc": resource.RLIMIT_NPROC, "fsize": resource.RLIMIT_FSIZE, "core": resource.RLIMIT_CORE}


def exit_code(status: int) -> int:
    """A wait status as a shell would report it: the exit code, or 128 + the signal's number."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _python_path_entries(env: dict[str, str]) -> list[str]:
    return [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


class Zygote:
    """Serves the connection it was started with (the parent) and one per worker it forked."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control.fileno()
        self.conns: dict[int, socket.socket] = {control.fileno(): control}
        self.owners: dict[int, int] = {}  # child pid -> the connection that asked for it
        self.pid = os.getpid()
        own = set(_python_path_entries(dict(os.environ)))
        # What a fresh interpreter's sys.path holds besides PYTHONPATH: a child gets its own
        # environment's PYTHONPATH in front of it, as it would have been started with.
        self.base_path = [p for p in sys.path if p and os.path.abspath(p) not in own]
        # Python's start-up sets LC_CTYPE in a C locale (PEP 538); a fresh interpreter would too.
        self.coerced = {"LC_CTYPE": os.environ["LC_CTYPE"]} if "LC_CTYPE" in os.environ else {}
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        frames.send(self.control, {"kind": "ready", "pid": self.pid})
        while self.control in self.conns:
            ready, _, _ = select.select([*self.conns, self.wake_r], [], [], 1.0)
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            self._reap()
            for fd in ready:
                if fd in self.conns:
                    self._serve_one(fd)
        for fd in list(self.conns):
            self._drop(fd)

    def _serve_one(self, fd: int) -> None:
        fds: list[int] = []
        try:
            msg, fds, _flags, _addr = socket.recv_fds(self.conns[fd], 1, MAX_FDS)
            request = frames.recv(fd, timeout=10.0) if msg else None
            if request is None:
                self._drop(fd)  # its owner is gone: so is everything it asked for
                return
            frames.send(fd, self._start(request, fds, fd))
        except (OSError, frames.FrameError, frames.FrameTimeout):
            self._drop(fd)
        finally:
            for received in fds:
                with contextlib.suppress(OSError):
                    os.close(received)

    def _drop(self, fd: int) -> None:
        conn = self.conns.pop(fd, None)
        if conn is not None:
            conn.close()
        for pid, owner in list(self.owners.items()):
            if owner == fd:
                for kill in (os.killpg, os.kill):  # each child leads a session of its own
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        kill(pid, signal.SIGKILL)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            owner = self.owners.pop(pid, None)
            if owner in self.conns:
                with contextlib.suppress(OSError):
                    frames.send(owner, {"kind": "exit", "pid": pid, "code": exit_code(status)})

    # free-form: the request as it came off the socket (jail_command.ForkRequest is what the worker
    # sends), checked field by field here; the answer is a frame for the owner
    def _start(self, request: dict[str, Any], fds: list[int], owner: int) -> dict[str, Any]:
        kind = request.get("kind", "jail")
        try:
            plan = (WorkerPlan if kind == "worker" else JailPlan)(request, fds, self.base_path, self.coerced)
        except (KeyError, TypeError, ValueError) as exc:
            return {"kind": "error", "message": f"bad {kind} request: {exc}"}
        if isinstance(plan, WorkerPlan):
            return self._start_worker(plan, fds, owner)
        ack_r, ack_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # C
            os.close(ack_r)
            try:
                plan.run(ack_w, self.pid, keep={ack_w, *fds})
            except BaseException as exc:  # noqa: BLE001 - told to the zygote, which tells the worker
                _tell(ack_w, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")
            os._exit(127)
        os.close(ack_w)
        self.owners[pid] = owner
        said = _read_ack(ack_r, SETUP_TIMEOUT_S)
        if said == "ok":
            return {"kind": "started", "pid": pid}
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return {"kind": "error", "pid": pid, "message": said or "the jail ended before it was set up"}

    # free-form: a frame for the owner, as _start's
    def _start_worker(self, plan: WorkerPlan, fds: list[int], owner: int) -> dict[str, Any]:
        """A trusted worker: no jail, a connection of its own here for its runners' jails."""
        ours, theirs = socket.socketpair()
        frames.send(ours.fileno(), {"kind": "ready", "pid": self.pid})  # read once it listens
        pid = os.fork()
        if pid == 0:
            try:
                plan.run(theirs.fileno(), self.pid)
            except BaseException:  # noqa: BLE001 - on the worker's stderr, which is the parent's
                traceback.print_exc()
            os._exit(127)
        theirs.close()
        self.conns[ours.fileno()] = ours
        self.owners[pid] = owner
        return {"kind": "started", "pid": pid}


class ModuleRun:
    """What every request names: a module run as ``python -m`` would, with its arguments, its
    environment and its descriptors (stdout, stderr, then one per ``fd_targets`` number)."""

    def __init__(
        # free-form: the request off the socket, as _start received it
        self, request: dict[str, Any], fds: list[int], base_path: list[str], coerced: dict[str, str]
    ) -> None:
        self.module = str(request["module"])
        self.args = [str(a) for a in request["args"]]
        self.env = {str(k): str(v) for k, v in request["env"].items()}
        if not {"LC_ALL", "LC_CTYPE", "LANG"} & set(self.env):
            self.env.update(coerced)
        slots = [int(t) for t in request["fd_targets"]]
        if len(slots) + 2 != len(fds):
            raise ValueError(f"{len(fds)} descriptors for {len(slots)} targets, stdout and stderr")
        self.stdout, self.stderr = fds[0], fds[1]
        self.targets = dict(zip(fds[2:], slots, strict=True))
        own = _python_path_entries(self.env)
        self.sys_path = own + [p for p in base_path if os.path.abspath(p) not in own]

    def become(self, argv: list[str]) -> None:
        """Take this run's environment, import path and command line (after the descriptors)."""
        enter.set_name("stark-" + self.module.rsplit(".", 1)[-1])
        os.environ.clear()
        os.environ.update(self.env)
        enter.apply_malloc_settings(self.env)
        sys.path[:] = self.sys_path
        tempfile.tempdir = None
        sys.argv = [self.module, *argv]
        # As ``python -m`` runs it: a copy the zygote preloaded stays out of sys.modules (its
        # imports stay in), or runpy warns into every log.
        sys.modules.pop(self.module, None)

    def run_module(self) -> None:
        code = 0
        try:
            runpy.run_module(self.module, run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, then exit 1
            traceback.print_exc()
            code = 1
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class WorkerPlan(ModuleRun):
    """A trusted worker: its own session, death with the zygote, the descriptors it was given and
    its connection here, whose number replaces ``{zygote_fd}`` in its arguments."""

    def run(self, conn: int, zygote: int) -> None:
        _leave(zygote)
        at = max([*self.targets.values(), 2]) + 1
        enter.place_fds({**self.targets, conn: at}, None, self.stdout, self.stderr)
        self.become([a.replace("{zygote_fd}", str(at)) for a in self.args])
        self.run_module()


class JailPlan(ModuleRun):
    """One jail request, checked, and the three processes that carry it out."""

    def __init__(
        # free-form: the request off the socket, as _start received it
        self, request: dict[str, Any], fds: list[int], base_path: list[str], coerced: dict[str, str]
    ) -> None:
        super().__init__(request, fds, base_path, coerced)
        self.steps = [MountStep.from_json(s) for s in request["steps"]]
        self.uid = None if request.get("uid") is None else int(request["uid"])
        procs = request.get("cgroup_procs") or []
        self.cgroup_procs = [str(procs)] if isinstance(procs, str) else [str(p) for p in procs]
        self.limits = {str(k): int(v) for k, v in (request.get("limits") or {}).items()}
        self.cpus = [int(c) for c in request["cpus"]] if request.get("cpus") else None
        self.chdir = str(request.get("chdir") or "/")
        self.env["PWD"] = self.chdir  # as bubblewrap's --chdir sets it
        for name in self.limits:
            if name not in _LIMITS:
                raise ValueError(f"unknown limit {name}")

    def run(self, ack: int, zygote: int, keep: set[int]) -> None:
        """C: leave the zygote's session and signals, enter the cgroup, unshare, start I, mirror it."""
        _leave(zygote)
        enter.set_name("stark-jail")
        enter.close_fds_except(keep)
        for procs in self.cgroup_procs:  # a v2 group, and a v1 memory group on hybrid machines
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))
        for name, value in self.limits.items():
            resource.setrlimit(_LIMITS[name], (value, value))
        try:
            enter.unshare(enter.JAIL_NAMESPACES | enter.CLONE_NEWCGROUP)
        except enter.EnterError:
            enter.unshare(enter.JAIL_NAMESPACES)  # a kernel without cgroup namespaces
        init = os.fork()
        if init == 0:
            self._init(ack)
        # By name, not through /proc/self/fd: this mount namespace is I's, whose new /proc belongs to
        # a PID namespace this process is not in (a listing raced I's pivot and failed under load).
        for fd in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
        _, status = os.waitpid(init, 0)
        os._exit(exit_code(status))

    def _init(self, ack: int) -> None:
        """I: PID 1. Build the root, start R, drop what it no longer needs, reap until R ends."""
        try:
            enter.prctl(enter.PR_SET_PDEATHSIG, signal.SIGKILL)
            enter.set_name("stark-jail-init")
            enter.loopback_up()
            enter.build_root(self.steps, self.chdir)
            runner = os.fork()
            if runner == 0:
                self._runner(ack)
        except BaseException as exc:  # noqa: BLE001
            _tell(ack, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")
            os._exit(127)
        enter.close_fds_except(set())
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # PID 1 ignores what it does not handle
        enter.drop_privileges(None)
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                os._exit(0)
            if pid == runner:
                os._exit(exit_code(status))

    def _runner(self, ack: int) -> None:
        """R: what the jail runs. Nothing of the zygote's is reachable once this says ``ok``."""
        try:
            os.setsid()
            if self.cpus:
                os.sched_setaffinity(0, self.cpus)
            enter.drop_privileges(self.uid)
            ack_at = max([*self.targets.values(), 2]) + 1
            enter.place_fds({**self.targets, ack: ack_at}, None, self.stdout, self.stderr)
            self.become(self.args)
        except BaseException as exc:  # noqa: BLE001
            _tell(ack, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")
            os._exit(127)
        _tell(ack_at, "ok")
        os.close(ack_at)
        self.run_module()


def _leave(zygote: int) -> None:
    """A child's first steps: the zygote's signal handling undone, a session of its own, and death
    with the zygote (already gone: then at once)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    enter.prctl(enter.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote:
        os._exit(1)


def _tell(fd: int, text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, text.encode("utf-8", "replace")[:4000])


def _read_ack(fd: int, timeout: float) -> str:
    """``ok``, or what went wrong (empty when the jail's processes ended without a word)."""
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
            if data == b"ok":
                return "ok"
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").strip()


def main(argv: list[str]) -> None:
    sock = socket.socket(fileno=int(argv[0]))
    enter.prctl(enter.PR_SET_PDEATHSIG, signal.SIGKILL)
    enter.set_name("stark-zygote")
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    for name in [*PRELOAD, *argv[1:]]:
        importlib.import_module(name)
    # Children then copy no page to collect what was imported here (and start with it frozen).
    gc.collect()
    gc.freeze()
    Zygote(sock).serve()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    finally:
        os._exit(0)
