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
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stark_mcp.evaluator.sandbox.cgroups import CGroup, dead_owner
from stark_mcp.evaluator.sandbox.claims import (
    Claim,
    ClaimError,
    Owner,
    pid_namespace,
    processes_of,
    start_time,
)
from stark_mcp.evaluator.sandbox.forked import ZygoteClient
from stark_mcp.evaluator.sandbox.host_layout import GpuLayoutError, gpu_device_nodes, jail_visible_devices
from stark_mcp.evaluator.sandbox.layout import (
    ALWAYS_HIDDEN,
    SCRATCH_INSIDE,
    MountStep,
    bwrap_args,
    existing_dirs,
    jail_layout,
)
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, detect

UID_COUNT = 512


@dataclass(frozen=True)
class Mount:
    src: str  # host path
    dest: str  # path inside the sandbox (under /tmp); at weaker levels the host path is used
    writable: bool = False


@dataclass
class JailSpec:
    argv: list[str]
    env: dict[str, str]
    name: str = "jail"
    mounts: list[Mount] = field(default_factory=list)
    gpu: int | None = None  # host CUDA index (PCI order) to expose; None: no GPU device at all
    cpus: list[int] | None = None  # CPU affinity of the jailed process
    scratch_bytes: int = 2 << 30
    max_processes: int = 512
    max_file_bytes: int = 1 << 30
    # What the jail's processes may hold in memory, shared memory and tmpfs files included (cgroup
    # memory.max); None: half the machine's memory (``default_memory_cap``).
    memory_max: int | None = None
    hidden: list[str] = field(default_factory=list)  # host dirs to hide (data, caches)
    visible: list[str] = field(default_factory=list)  # host dirs that must stay readable inside


class JailError(RuntimeError):
    """The jail could not be started (a missing tool, a broken bubblewrap)."""


# ---- uids -------------------------------------------------------------------------------------------


class _Uid:
    """A uid no other evaluator on this machine uses right now: a machine-wide claim (``claims.py``)
    held for as long as the jail lives, whose record says what of that uid is this jail's."""

    def __init__(self, base: int) -> None:
        taken = _passwd_uids()
        for uid in range(base, base + UID_COUNT):
            if uid in taken:
                continue
            try:
                got = Claim.take("uids", str(uid))
            except (OSError, ClaimError) as exc:
                raise JailError(f"cannot claim a sandbox uid: {exc}") from None
            if got is None:
                continue  # another evaluator's, right now
            claim, previous = got
            if processes_of(uid) and previous is not None and not previous.owner_alive():
                # A SIGKILLed owner's leftovers: what its record proves was its jail, and only that.
                for path in previous.cgroup_dirs:
                    if dead_owner(os.path.basename(os.path.dirname(path))):
                        CGroup(path).remove(timeout=2.0)
                _kill_owned(uid, previous)
            if processes_of(uid):  # someone's we cannot prove are leftovers: never signalled, skipped
                claim.release(clean=False)
                continue
            claim.record()
            self.uid, self.claim = uid, claim
            return
        raise JailError(f"no free sandbox uid in {base}..{base + UID_COUNT - 1}")

    def note(self, **fields: Any) -> None:
        """Add what the jail is made of to the claim's record, as it becomes known."""
        for key, value in fields.items():
            setattr(self.claim.owner, key, value)
        self.claim.record()

    def owned(self, ancestors: tuple[int, ...]) -> list[int]:
        owner = self.claim.owner
        return [pid for pid in processes_of(self.uid) if owner.owns(pid, ancestors)]

    def kill_owned(self, ancestors: tuple[int, ...]) -> None:
        _kill_owned(self.uid, self.claim.owner, ancestors)

    def release(self, ancestors: tuple[int, ...]) -> None:
        self.kill_owned(ancestors)
        self.claim.release(clean=not processes_of(self.uid))


def _passwd_uids() -> set[int]:
    try:
        with open("/etc/passwd") as fh:
            return {int(line.split(":")[2]) for line in fh if line.count(":") >= 3}
    except (OSError, ValueError):
        return set()


def _kill_owned(uid: int, owner: Owner, ancestors: tuple[int, ...] = (), rounds: int = 50) -> None:
    """SIGKILL every process of ``uid`` that ``owner`` provably owns, until none is left (a fork bomb
    needs several rounds). Each is held by a pidfd while it is checked, so the signal reaches the
    process that was checked, never a later one given its pid."""
    for _ in range(rounds):
        found = False
        for pid in processes_of(uid):
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if owner.owns(pid, ancestors):
                    found = True
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(fd)
        if not found:
            return
        time.sleep(0.005)


@dataclass(frozen=True)
class JailCpu:
    """A frozen jail's CPU time two ways: its cgroup's total, and each live process's own clock."""

    group_ns: int
    live_ns: dict[int, int]

    def ended_since(self, earlier: JailCpu) -> int:
        """CPU time spent since ``earlier`` by processes no live clock shows any more: children that
        ended in between (a process started since then counts in full; a pid reused by a new process
        lowers the live sum, which only raises this figure)."""
        live = sum(ns - earlier.live_ns.get(pid, 0) for pid, ns in self.live_ns.items())
        return self.group_ns - earlier.group_ns - live


def process_cpu_ns(pid: int, children: bool = True) -> int:
    """CPU time of one process, its threads (live and ended) and, with ``children``, its reaped
    children, in ns; 0 when it is gone. The process clock is exact for a task on a core; the
    children's share is in ticks."""
    try:
        own = time.clock_gettime_ns(((~pid) << 3) | 2)  # the process's CPUCLOCK_SCHED clock id
    except OSError:
        return 0
    if not children:
        return own
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        children = (int(fields[13]) + int(fields[14])) * (1_000_000_000 // _TICKS)
    except (OSError, ValueError, IndexError):
        children = 0
    return own + children


_TICKS = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (through /proc/<pid>/task/*/children)."""
    out: list[int] = []
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            stack.extend(kids)
    return out


# ---- the jail ----------------------------------------------------------------------------------------


class Jail:
    """One jailed process tree. ``close()`` (or leaving ``with``) kills all of it."""

    def __init__(self, spec: JailSpec, info: IsolationInfo) -> None:
        self.spec, self.info = spec, info
        self.level = info.level
        self.proc: subprocess.Popen[bytes] | None = None
        self.cgroup: CGroup | None = None
        self._uid: _Uid | None = None
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
            self._uid = _Uid(self.info.uid_base)
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
            self.proc = zygote.start_jail(*self._fork_request(call, env, pass_fds, stdout, stderr))
            self.child_pid = self.proc.pid
            self._note_first()
            return
        argv = self._argv(env)
        info_r = info_w = None
        if self.level == "sandbox":
            info_r, info_w = os.pipe()
            argv = _insert_after(argv, info.bwrap or "bwrap", ["--info-fd", str(info_w)])
        fds = tuple(pass_fds) + ((info_w,) if info_w is not None else ())
        try:
            self.proc = subprocess.Popen(
                argv,
                env=env if self.level != "sandbox" else _host_env(),
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
            self.child_pid = _read_child_pid(info_r, self.proc)
        else:
            self.child_pid = self._find_child()
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

    def _fork_request(
        self,
        call: tuple[str, list[str]],
        env: dict[str, str],
        pass_fds: tuple[int, ...],
        stdout: int | None,
        stderr: int | None,
    ) -> tuple[dict[str, Any], list[int]]:
        """What the zygote needs to build this jail as ``_argv`` would: the same mount plan, limits,
        uid, cgroup and cores, and the descriptors at the numbers the command names."""
        spec = self.spec
        out = sys.stdout.fileno() if stdout is None else stdout
        err = out if stderr == subprocess.STDOUT else (sys.stderr.fileno() if stderr is None else stderr)
        limits: dict[str, int] = {}
        if self.info.prlimit:  # what prlimit sets on the bubblewrap path
            limits = {"nproc": spec.max_processes, "fsize": spec.max_file_bytes, "core": 0}
        request = {
            "module": call[0],
            "args": call[1],
            "steps": [step.to_json() for step in self.layout()],
            "env": env,
            "uid": self.uid,
            "cgroup_procs": self.cgroup.procs_files if self.cgroup is not None else [],
            "limits": limits,
            "cpus": spec.cpus,
            "chdir": SCRATCH_INSIDE,
            "fd_targets": list(pass_fds),
        }
        return request, [out, err, *pass_fds]

    def _argv(self, env: dict[str, str]) -> list[str]:
        spec, info = self.spec, self.info
        inner = list(spec.argv)
        if spec.cpus:
            inner = ["taskset", "-c", ",".join(map(str, spec.cpus)), *inner]
        if self._uid is not None and info.setpriv:
            inner = [
                info.setpriv,
                f"--reuid={self._uid.uid}",
                f"--regid={self._uid.uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
                *inner,
            ]
        if self.level == "sandbox":
            inner = self._bwrap(env) + ["--", *inner]
        if info.prlimit:
            inner = [
                info.prlimit,
                f"--nproc={spec.max_processes}",
                f"--fsize={spec.max_file_bytes}",
                "--core=0",
                "--",
                *inner,
            ]
        if self.cgroup is not None:
            inner = ["/bin/sh", "-c", _JOIN, "stark-join", *self.cgroup.procs_files, "--", *inner]
        return inner

    def _bwrap(self, env: dict[str, str]) -> list[str]:
        argv = [
            self.info.bwrap or "bwrap",
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
        ]
        if not self.info.root:
            argv += ["--unshare-user", "--disable-userns"]
        argv += bwrap_args(self.layout())
        argv += ["--chdir", SCRATCH_INSIDE, "--clearenv"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        return argv

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

    def _find_child(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

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
            _signal(pid, signal.SIGSTOP)
        return True

    def thaw(self) -> None:
        if self.cgroup is not None and self.cgroup.freeze(False):
            return
        for pid in self._frozen_pids:
            _signal(pid, signal.SIGCONT)
        self._frozen_pids = []

    def kill_all(self) -> None:
        self._killed_by_us = True
        if self.cgroup is not None:
            self.cgroup.kill()
        if self.proc is not None:
            for pid in [self.proc.pid, *descendants(self.proc.pid)]:
                _signal(pid, signal.SIGKILL)
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


def inside_path(level: str, mount: Mount) -> str:
    """Where a mount appears to the jailed process: its destination only inside a mount namespace."""
    return mount.dest if level == "sandbox" else mount.src


# ---- helpers -----------------------------------------------------------------------------------------

# Joins every group named before ``--`` (a v2 group, and a v1 memory group on hybrid machines), then
# runs the rest: the jail's first process is in all of them before any of its code runs.
_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'


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


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _host_env() -> dict[str, str]:
    """bubblewrap itself gets a minimal environment; the jailed process gets ``--setenv`` values only."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _insert_after(argv: list[str], marker: str, extra: list[str]) -> list[str]:
    i = argv.index(marker)
    return argv[: i + 1] + extra + argv[i + 1 :]


def _read_child_pid(fd: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """bubblewrap writes ``{"child-pid": N}`` once the sandbox exists."""
    import select

    data = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
                if b"}" in data:
                    break
            elif proc.poll() is not None:
                break
    finally:
        os.close(fd)
    try:
        return int(json.loads(data.decode())["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def reclaim_tree(path: Path) -> None:
    """Take files a jail wrote (as a sandbox uid) back to us before they enter a cache, so the
    uid that made them cannot change them later."""
    if os.geteuid() != 0 or not path.exists():
        return
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            try:
                os.lchown(name, 0, 0)
            except OSError:
                pass


def unreadable_root(root: str, level: str, hidden: list[str]) -> str | None:
    """The folder that keeps a candidate's uid (root only: levels sandbox and uid run it as another
    user) from importing under ``root``, or None. Inside the sandbox, folders from a hidden
    directory (or the scratch, /tmp) down to ``root`` are recreated world-traversable, so only
    those above count."""
    real = os.path.realpath(root)
    replaced = [*existing_dirs([*ALWAYS_HIDDEN, os.path.expanduser("~"), *hidden]), SCRATCH_INSIDE]
    covered = [h for h in replaced if real == h or real.startswith(h + "/")] if level == "sandbox" else []
    path = real
    while True:
        synthetic = path != real and any(path == h or path.startswith(h + "/") for h in covered)
        need = stat.S_IXOTH | (stat.S_IROTH if path == real else 0)
        if not synthetic:
            try:
                mode = os.stat(path).st_mode
            except OSError:
                return path
            if mode & need != need:
                return path
        if path == "/":
            return None
        path = os.path.dirname(path)


def chown_tree(path: str, uid: int) -> None:
    """Give ``path`` and everything under it to ``uid`` (what cannot be changed is left)."""
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            try:
                os.lchown(name, uid, uid)
            except OSError:
                pass
