"""Machine-wide claims on what identifies a sandbox, and proof of which processes are whose.

Every evaluator on a machine (an MCP server beside a terminal ``run``, two hosts, two users as root)
must agree on who holds a sandbox uid, whatever TMPDIR, HOME or STARK_HOME each was started with: the
claims live in one directory chosen from fixed paths only (``lock_dir``). A claim is an ``flock`` on
``<dir>/uids/<uid>.lock``, held for the jail's life and released by the kernel when its holder dies,
and the file records who holds it: the owner's pid and start time, and what its jail is made of (its
cgroups, its PID namespace, its first process). An evaluator signals only processes it can prove are
its own (``Owner.owns``); a claim found free with processes of the uid still alive is cleaned only of
what that record proves was the dead owner's, and skipped (never signalled) while anything else of
that uid lives. Standard library only.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from dataclasses import asdict, dataclass, field

# Tried in order; the first that exists (or can be made) owned by us and writable by no one else is
# used. /run is root's (a tmpfs cleared at boot), which is where uids are claimed (only root runs
# candidates as other uids); /dev/shm and /var/lock are the fallbacks where /run is read-only (some
# containers), each suffixed with our uid so that one user's directory never holds another's claims.
LOCK_PARENTS = ("/run", "/dev/shm", "/var/lock")


class ClaimError(RuntimeError):
    """No directory for machine-wide claims could be used."""


def lock_dir() -> str:
    """The directory every evaluator of this euid on this machine keeps its claims in."""
    euid = os.geteuid()
    name = "stark-mcp" if euid == 0 else f"stark-mcp-{euid}"
    tried = []
    for parent in LOCK_PARENTS:
        path = os.path.join(parent, name)
        try:
            os.mkdir(path, 0o755 if euid == 0 else 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            tried.append(f"{path}: {exc.strerror}")
            continue
        try:
            info = os.lstat(path)
        except OSError as exc:
            tried.append(f"{path}: {exc.strerror}")
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != euid or info.st_mode & 0o022:
            tried.append(f"{path}: not a directory of ours that only we can write")
            continue
        return path
    raise ClaimError("no directory for machine-wide sandbox claims: " + "; ".join(tried))


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), which with the pid names one process for good."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def cgroups_of(pid: int) -> set[str]:
    """The cgroup paths (as /proc shows them) ``pid`` is in, one per hierarchy."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            return {line.strip().split(":", 2)[2] for line in fh if line.count(":") >= 2}
    except OSError:
        return set()


def processes_of(uid: int) -> list[int]:
    """Every live process whose real uid is ``uid`` (not zombies: they hold nothing, and only their
    parent's wait ends them)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                zombie = False
                for line in fh:
                    if line.startswith("State:"):
                        zombie = line.split()[1] in ("Z", "X")
                    elif line.startswith("Uid:"):
                        if int(line.split()[1]) == uid and not zombie:
                            pids.append(int(entry))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return pids


def alive(pid: int, started: int | None) -> bool:
    """The process ``pid`` that started at ``started`` still runs (not a later one with its pid)."""
    return started is not None and start_time(pid) == started


@dataclass
class Owner:
    """Who holds a claim and what its jail is made of: what proves a process is the jail's."""

    pid: int = 0
    started: int | None = None
    cgroups: list[str] = field(default_factory=list)  # paths as /proc/<pid>/cgroup shows them
    cgroup_dirs: list[str] = field(default_factory=list)  # the same groups in the cgroup file system
    pidns: str | None = None  # the jail's own PID namespace (never the owner's)
    first: int | None = None  # the jail's first process, and its start time
    first_started: int | None = None

    @classmethod
    def me(cls) -> Owner:
        return cls(pid=os.getpid(), started=start_time(os.getpid()))

    def owner_alive(self) -> bool:
        return self.pid > 0 and alive(self.pid, self.started)

    def owns(self, pid: int, ancestors: tuple[int, ...] = ()) -> bool:
        """``pid`` is provably this jail's: in one of its cgroups, in its PID namespace, its first
        process, or a descendant of it or of one of ``ancestors`` (processes of ours that are
        subreapers, where its orphans land)."""
        if self.cgroups and cgroups_of(pid) & set(self.cgroups):
            return True
        if self.pidns is not None and pid_namespace(pid) == self.pidns:
            return True
        roots = set(ancestors)
        if self.first is not None and alive(self.first, self.first_started):
            roots.add(self.first)
        current: int | None = pid
        for _ in range(64):
            if current is None or current <= 1:
                return False
            if current in roots:
                return True
            current = parent_of(current)
        return False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Owner | None:
        try:
            data = json.loads(text)
            return cls(
                pid=int(data["pid"]),
                started=None if data.get("started") is None else int(data["started"]),
                cgroups=[str(c) for c in data.get("cgroups") or []],
                cgroup_dirs=[str(c) for c in data.get("cgroup_dirs") or []],
                pidns=None if data.get("pidns") is None else str(data["pidns"]),
                first=None if data.get("first") is None else int(data["first"]),
                first_started=None if data.get("first_started") is None else int(data["first_started"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


class Claim:
    """An flock on one name under ``lock_dir()/<kind>``, with its holder's ``Owner`` record in it."""

    def __init__(self, fd: int, path: str, owner: Owner) -> None:
        self.fd, self.path, self.owner = fd, path, owner

    @classmethod
    def take(cls, kind: str, name: str) -> tuple[Claim, Owner | None] | None:
        """The claim, with the record its last holder left (None if it never held it or left it
        clean), or None while another process holds it."""
        folder = os.path.join(lock_dir(), kind)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, f"{name}.lock")
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            previous = Owner.from_json(os.pread(fd, 1 << 16, 0).decode("utf-8", "replace") or "{}")
        except OSError:
            previous = None
        return cls(fd, path, Owner.me()), previous

    def record(self) -> None:
        """Write our owner record, once the claim is kept (and again as the jail's cgroups and
        processes become known); until then the last holder's record stays for the next taker."""
        data = self.owner.to_json().encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self, clean: bool) -> None:
        """Let the claim go; with ``clean``, empty the record (nothing of ours is left to sweep)."""
        if clean:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
        os.close(self.fd)
