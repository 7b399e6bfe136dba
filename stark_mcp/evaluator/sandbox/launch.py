"""Start a process behind the strongest wall this machine allows, and take everything it started down.

``Jail.start(spec)`` runs ``spec.argv`` as one of (see ``levels.py``):
  sandbox:  [sh: join cgroup] prlimit -- bwrap <namespaces, read-only /, tmpfs /tmp scratch, binds>
            [setpriv --reuid=U] -- argv
  uid:      [sh: join cgroup] prlimit -- setpriv --reuid=U -- argv     (scratch: a 0700 dir owned by U)
  process:  prlimit -- argv, in its own session                         (scratch: a private temp dir)
Inside, the scratch directory is ``/tmp`` at the sandbox level (a size-capped tmpfs), and the jail's
``inside()`` maps every mount to the path the process sees, so callers never depend on the level.

Everything a jail started is killed by ``close()``: a cgroup's ``cgroup.kill`` where one exists, the
death of bubblewrap's PID-namespace init, and a sweep of the jail's uid; at the process level, the
process group plus every descendant still reachable. Standard library only.

The jail's parts, one job a module: what it is made of (``jail_spec.py``), its launcher chain and the
zygote's request (``jail_command.py``), its uid (``jail_uids.py``), its processes seen from outside
(``process_tree.py``), and who owns its files (``jail_files.py``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time

from stark_mcp.evaluator.sandbox.cgroups import CGroup
from stark_mcp.evaluator.sandbox.claims import pid_namespace, start_time
from stark_mcp.evaluator.sandbox.forked import ZygoteClient
from stark_mcp.evaluator.sandbox.host_layout import GpuLayoutError, gpu_device_nodes, jail_visible_devices
from stark_mcp.evaluator.sandbox.jail_command import (
    fork_request,
    host_env,
    insert_after,
    jail_argv,
    read_child_pid,
)
from stark_mcp.evaluator.sandbox.jail_files import chown_tree
from stark_mcp.evaluator.sandbox.jail_spec import JailError, JailSpec, Mount, inside_path
from stark_mcp.evaluator.sandbox.jail_uids import JailUid
from stark_mcp.evaluator.sandbox.layout import SCRATCH_INSIDE, MountStep, jail_layout
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, detect
from stark_mcp.evaluator.sandbox.process_tree import JailCpu, descendants, process_cpu_ns, signal_quietly

__all__ = [
    "Jail",
    "JailCpu",
    "JailError",
    "JailSpec",
    "Mount",
    "chown_tree",
    "default_memory_cap",
    "descendants",
    "die_with_parent",
    "inside_path",
]


class Jail:
    """One jailed process tree. ``close()`` (or leaving ``with``) kills all of it."""

    def __init__(self, spec: JailSpec, info: IsolationInfo) -> None:
        self.spec, self.info = spec, info
        self.level = info.level
        self.proc: subprocess.Popen[bytes] | None = None
        self.cgroup: CGroup | None = None
        self._uid: JailUid | None = None
        self._scratch_host: str | None = None
        self.child_pid: int | None = None  # the jailed command's pid as seen from here
        self._killed_by_us = False
        self._frozen_pids: list[int] = []

    # -- paths ---------------------------------------------------------------------------------------
    @property
    def scratch(self) -> str:
        """The scratch directory as the jailed process sees it."""
        return SCRATCH_INSIDE if self.level == "sandbox" else str(self._scratch_host)

    def inside(self, mount: Mount) -> str:
        return inside_path(self.level, mount)

    @property
    def uid(self) -> int | None:
        return self._uid.uid if self._uid else None

    # -- start ---------------------------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        spec: JailSpec,
        info: IsolationInfo | None = None,
        *,
        pass_fds: tuple[int, ...] = (),
        stdout: int | None = None,
        stderr: int | None = None,
        zygote: ZygoteClient | None = None,
    ) -> Jail:
        """With ``zygote``, a module run at the sandbox level as root is forked from it (``zygote.py``)
        instead of started by bubblewrap: the same walls, without importing torch again. If it
        cannot, ``ZygoteUnavailable`` says why (and the zygote client is no longer ``alive``)."""
        jail = cls(spec, info or detect())
        try:
            jail._start(pass_fds, stdout, stderr, zygote)
        except BaseException:
            jail.close()
            raise
        return jail

    def _start(
        self, pass_fds: tuple[int, ...], stdout: int | None, stderr: int | None, zygote: ZygoteClient | None
    ) -> None:
        spec, info = self.spec, self.info
        if info.root and self.level in ("sandbox", "uid"):
            self._uid = JailUid(self.info.uid_base)
        if self.level != "sandbox":
            self._scratch_host = tempfile.mkdtemp(prefix=f"stark-{spec.name}-")
            if self._uid is not None:
                os.chown(self._scratch_host, self._uid.uid, self._uid.uid)
        if self._uid is not None:
            for m in spec.mounts:
                if m.writable:
                    chown_tree(m.src, self._uid.uid)
                elif self.level == "uid":  # no mount namespace: only the owner may read it
                    chown_tree(m.src, self._uid.uid)
                    os.chmod(m.src, 0o700)
        env = dict(spec.env)
        env["HOME"] = self.scratch  # never the user's: tools read config (and secrets) from HOME
        if self.level == "sandbox" and spec.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = jail_visible_devices(spec.gpu)  # only its own node is inside
        env["TMPDIR"] = self.scratch
        if self._uid is not None:
            # A uid of our own has no passwd entry: getpass.getuser() (the torch profiler, Triton's
            # cache) falls back to getpwuid() and raises KeyError unless the name is in the environment.
            env["USER"] = env["LOGNAME"] = f"stark{self._uid.uid}"
        if info.cgroup and info.root:
            self.cgroup = CGroup.create(
                info.cgroup,
                f"{spec.name}-{time.monotonic_ns()}",
                pids_max=spec.max_processes,
                memory_max=spec.memory_max if spec.memory_max is not None else default_memory_cap(),
            )
            if self.cgroup is not None and self._uid is not None:
                self._uid.note(cgroups=self.cgroup.proc_paths(), cgroup_dirs=self.cgroup.dirs)
        call = zygote.runs(spec.argv) if zygote is not None and zygote.alive() else None
        if call is not None and self.level == "sandbox" and info.root:
            # ZygoteUnavailable propagates (start() closes this jail, and cgroup.kill takes whatever
            # the attempt started): its caller retries with fresh descriptors, not these, which a
            # half-built jail may already have written to.
            cgroup_procs = self.cgroup.procs_files if self.cgroup is not None else []
            request, fork_fds = fork_request(
                spec, info, call, self.layout(), env, self.uid, cgroup_procs, pass_fds, stdout, stderr
            )
            self.proc = zygote.start_jail(request, fork_fds)
            self.child_pid = self.proc.pid
            self._note_first()
            return
        argv = jail_argv(
            spec,
            info,
            self.level,
            self.uid,
            self.cgroup.procs_files if self.cgroup is not None else None,
            self.layout() if self.level == "sandbox" else [],
            env,
        )
        info_r = info_w = None
        if self.level == "sandbox":
            info_r, info_w = os.pipe()
            argv = insert_after(argv, info.bwrap or "bwrap", ["--info-fd", str(info_w)])
        fds = tuple(pass_fds) + ((info_w,) if info_w is not None else ())
        try:
            self.proc = subprocess.Popen(
                argv,
                env=env if self.level != "sandbox" else host_env(),
                cwd=self._scratch_host or "/",
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                pass_fds=fds,
                close_fds=True,
                start_new_session=True,
            )
        except OSError as exc:
            raise JailError(f"cannot start {argv[0]}: {exc}") from None
        finally:
            if info_w is not None:
                os.close(info_w)
        if info_r is not None:
            self.child_pid = read_child_pid(info_r, self.proc)
        else:
            self.child_pid = self.proc.pid
        self._note_first()

    def _note_first(self) -> None:
        """Record the jail's first process (and its PID namespace, where it has one of its own) with
        the uid's claim: what proves its processes are this jail's to a later evaluator, if we die."""
        if self._uid is None or self.proc is None:
            return
        first = self.child_pid or self.proc.pid
        pidns = pid_namespace(first)
        self._uid.note(
            first=first,
            first_started=start_time(first),
            pidns=pidns if pidns is not None and pidns != pid_namespace(os.getpid()) else None,
        )

    def layout(self) -> list[MountStep]:
        """The sandbox's mount steps (``layout.py``), for whichever launcher performs them."""
        spec = self.spec
        nodes: list[str] = []
        if spec.gpu is not None:
            try:
                nodes = gpu_device_nodes(spec.gpu)
            except GpuLayoutError as exc:
                raise JailError(str(exc)) from None
        return jail_layout(
            [(m.src, m.dest, m.writable) for m in spec.mounts],
            nodes,
            spec.hidden,
            spec.visible,
            spec.scratch_bytes,
        )

    # -- life ----------------------------------------------------------------------------------------
    def poll(self) -> int | None:
        return self.proc.poll() if self.proc is not None else -1

    def wait(self, timeout: float | None = None) -> int | None:
        if self.proc is None:
            return -1
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    @property
    def killed_by_us(self) -> bool:
        return self._killed_by_us

    def oom_killed(self) -> bool:
        """The jail ran out of its memory cap (or the kernel's OOM killer took one of its processes)."""
        return self.cgroup.oom_killed() if self.cgroup is not None else False

    @property
    def memory_cap(self) -> int | None:
        """The memory cap in force (bytes), or None where cgroups could not set one."""
        return self.cgroup.memory_max if self.cgroup is not None else None

    def pids(self) -> list[int]:
        """Every live process of the jail (the launcher chain included)."""
        if self.cgroup is not None:
            return self.cgroup.pids()
        found = set()
        if self.proc is not None and self.proc.poll() is None:
            found.add(self.proc.pid)
            found.update(descendants(self.proc.pid))
        if self._uid is not None:
            found.update(self._uid.owned(self._ancestors()))
        return sorted(found)

    def _ancestors(self) -> tuple[int, ...]:
        """Processes of ours a jail process may descend from: this one (a subreaper in the worker,
        where orphans land) and the jail's launcher."""
        return (os.getpid(),) + ((self.proc.pid,) if self.proc is not None else ())

    def cpu_ns(self) -> int:
        """CPU time the kernel accounted to every process of the jail so far (ns).

        Read through each live process's CPU-time clock, which brings a running task's accounting up
        to date (``/proc/<pid>/schedstat`` and cgroup counters lag a running task by up to a tick: a
        call read while the runner was still on a core would be charged to the next one). Processes
        that ended count through their reaper's ``cutime``/``cstime``, in 10 ms ticks, only without
        a cgroup: with one, the session charges them from the cgroup's exact total at each freeze
        (``CpuWindow``), and ticks landing on single calls would only hide from a median there."""
        children = self.cgroup is None
        return sum(process_cpu_ns(pid, children) for pid in self.pids())

    def cpu_snapshot(self) -> JailCpu | None:
        """The cgroup's CPU time (everything that ever ran in it, processes that have ended included,
        to the microsecond) beside each live process's clock, or None without a cgroup. Take it with
        the jail frozen: the two then agree except for the processes that ended in between."""
        if self.cgroup is None:
            return None
        group = self.cgroup.cpu_ns()
        if group is None:
            return None
        return JailCpu(group, {pid: process_cpu_ns(pid, children=False) for pid in self.pids()})

    def set_cpus(self, cpus: list[int]) -> None:
        """Move every thread of the jail's processes to ``cpus`` (a spare started on other cores)."""
        for pid in self.pids():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    os.sched_setaffinity(int(tid), cpus)
                except (OSError, ValueError):
                    pass  # a thread that ended meanwhile

    def freeze(self) -> bool:
        """Stop every process of the jail (the GPU work it already queued keeps running)."""
        if self.cgroup is not None and self.cgroup.freeze(True):
            return True
        self._frozen_pids = [p for p in self.pids() if self.proc is None or p != self.proc.pid]
        for pid in self._frozen_pids:
            signal_quietly(pid, signal.SIGSTOP)
        return True

    def thaw(self) -> None:
        if self.cgroup is not None and self.cgroup.freeze(False):
            return
        for pid in self._frozen_pids:
            signal_quietly(pid, signal.SIGCONT)
        self._frozen_pids = []

    def kill_all(self) -> None:
        self._killed_by_us = True
        if self.cgroup is not None:
            self.cgroup.kill()
        if self.proc is not None:
            for pid in [self.proc.pid, *descendants(self.proc.pid)]:
                signal_quietly(pid, signal.SIGKILL)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._uid is not None:
            self._uid.kill_owned(self._ancestors())

    def close(self) -> None:
        self.kill_all()
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self._uid is not None:
            self._uid.release(self._ancestors())
            self._uid = None
        if self._scratch_host is not None:
            shutil.rmtree(self._scratch_host, ignore_errors=True)
            self._scratch_host = None

    def __enter__(self) -> Jail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- helpers -----------------------------------------------------------------------------------------


def default_memory_cap() -> int:
    """Half the machine's memory: past it a jail is stopped by its own cap, well before the kernel's
    OOM killer would pick the largest process on the machine (often the trusted worker)."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return max(1 << 30, pages * size // 2)
    except (OSError, ValueError):
        return 8 << 30


def die_with_parent() -> None:
    """Called first thing inside jailed processes: at the weaker levels nothing else kills them when the
    process that started them dies (bubblewrap does at the sandbox level)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


