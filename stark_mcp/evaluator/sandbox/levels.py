"""Which wall this machine lets us build around candidate processes, found once per process.

Levels, strongest first:
  ``sandbox``: bubblewrap over Linux namespaces (own PID, mount, network, IPC namespaces; read-only
               view of the system; private scratch). As root the sandboxed process also drops to a uid
               of its own, so process limits bind and every process it starts can be found and killed.
  ``uid``:     no usable bubblewrap, but we are root: the candidate runs as a uid of its own, which
               cannot write our files or signal our processes; no mount or network isolation.
  ``process``: neither: same user, own session, resource limits, and a subreaper that catches
               double-forked daemons. Files the user can write are not protected at this level.

Standard library only (used by the parent, the trusted worker and its tests).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

LEVELS = ("sandbox", "uid", "process")
# The levels whose jails wall a problem's code off from the evaluator's user: its reference jail
# (evaluator/reference/) cannot write our files there, so a server may take problem code as text.
JAILING_LEVELS = ("sandbox", "uid")
PROBE_TIMEOUT_S = 20.0
DEFAULT_UID_BASE = 61000
NO_MEMORY_CAP = "jails have no memory cap"


@dataclass(frozen=True)
class SandboxPolicy:
    """What the user asked for (the ``isolation``, ``bwrap`` and ``sandbox_uid_base`` settings).

    The parent builds one from its settings and hands it to the worker on its command line, so the
    choice is made in one place and no process below reads the environment for it.
    """

    isolation: str = "auto"  # auto (the strongest possible) or a level, to force a weaker one
    bwrap: str | None = None  # a bwrap binary (default: the one on PATH)
    uid_base: int = DEFAULT_UID_BASE  # first of the uids candidates run as (root only)
    # Workers, and runner jails where the jail runs as root, forked from a process that already
    # imported torch (sandbox/zygote.py); False starts each as a fresh interpreter (runners through
    # bubblewrap, as tool-wrapped runners always are).
    fork: bool = True

    def __post_init__(self) -> None:
        if self.isolation != "auto" and self.isolation not in LEVELS:
            raise ValueError(f"isolation {self.isolation!r}: choose auto or one of {', '.join(LEVELS)}")

    def to_json(self) -> str:
        return json.dumps(
            {"isolation": self.isolation, "bwrap": self.bwrap, "uid_base": self.uid_base, "fork": self.fork}
        )

    @classmethod
    def from_json(cls, text: str) -> SandboxPolicy:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class IsolationInfo:
    level: str
    bwrap: str | None = None
    setpriv: str | None = None
    prlimit: str | None = None
    root: bool = False
    userns: bool = False  # bwrap works as an unprivileged user (needs user namespaces)
    cgroup: str | None = None  # a writable cgroup v2 directory we may create groups under
    notes: list[str] = field(default_factory=list)
    possible: tuple[str, ...] = ("process",)  # the levels this machine can run, strongest first
    uid_base: int = DEFAULT_UID_BASE

    @property
    def jails_problems(self) -> bool:
        """Whether a problem's code runs walled off from the evaluator's user (``JAILING_LEVELS``)."""
        return self.level in JAILING_LEVELS

    @property
    def note(self) -> str:
        """Why the level is not ``sandbox``, and at any level why jails have no memory cap (empty
        when neither applies); ``doctor`` shows every note."""
        if self.level != "sandbox":
            return "; ".join(self.notes)
        return "; ".join(n for n in self.notes if n.startswith(NO_MEMORY_CAP))


def _run_ok(argv: list[str]) -> tuple[bool, str]:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()[-300:]


def _python_readable_by_others() -> bool:
    """A separate uid must be able to run this interpreter and read its packages."""
    import stat

    for path in {Path(sys.executable).resolve(), Path(__file__).resolve()}:
        for parent in [path, *path.parents]:
            try:
                mode = parent.stat().st_mode
            except OSError:
                return False
            if parent.is_dir() and not mode & stat.S_IXOTH:
                return False
    return True


def cgroup_root() -> str | None:
    """A cgroup v2 hierarchy we can create groups in (pure v2, or the unified half of a hybrid)."""
    for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if (
            os.path.exists(os.path.join(base, "cgroup.procs"))
            and os.path.exists(os.path.join(base, "cgroup.subtree_control"))
            and os.access(base, os.W_OK)
        ):
            return base
    return None


def _memory_capable(root: str) -> bool:
    """Jail groups under ``root`` can get ``memory.max``, or a v1 memory group (``cgroups.py``)."""
    from stark_mcp.evaluator.sandbox.cgroups import v1_memory_root

    try:
        with open(os.path.join(root, "cgroup.controllers")) as fh:
            if "memory" in fh.read().split():
                return True
    except OSError:
        pass
    return v1_memory_root() is not None


def _bwrap_probe(bwrap: str, setpriv: str | None, root: bool) -> tuple[bool, bool, str]:
    """(works as we will run it, works unprivileged, detail)."""
    base = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
    ]
    if root:
        ok, detail = _run_ok(
            base + ["--", setpriv or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "true"]
            if setpriv
            else base + ["true"]
        )
        return ok, False, detail
    ok, detail = _run_ok([bwrap, "--unshare-user", *base[1:], "true"])
    return ok, ok, detail


class IsolationUnavailable(ValueError):
    """The isolation setting asks for a level this machine cannot provide."""


_cached: dict[SandboxPolicy, IsolationInfo] = {}


def detect(policy: SandboxPolicy | None = None, refresh: bool = False) -> IsolationInfo:
    """The strongest level this process can use, or the weaker one ``policy`` forces."""
    policy = policy or SandboxPolicy()
    if policy in _cached and not refresh:
        return _cached[policy]
    root = os.geteuid() == 0
    bwrap = policy.bwrap or shutil.which("bwrap")
    setpriv = shutil.which("setpriv")
    prlimit = shutil.which("prlimit")
    notes: list[str] = []
    cgroup = cgroup_root() if root else None
    possible = ["process"]
    userns = False
    if root and setpriv and _python_readable_by_others():
        possible.insert(0, "uid")
    elif root and not setpriv:
        notes.append("setpriv (util-linux) is missing, so candidates cannot run as a uid of their own")
    elif root:
        notes.append(
            "the Python environment is not readable by other users, so candidates cannot run as a "
            "uid of their own outside a sandbox"
        )
    if bwrap:
        works, userns, detail = _bwrap_probe(bwrap, setpriv, root)
        if works:
            possible.insert(0, "sandbox")
        else:
            notes.append(f"bubblewrap is installed but cannot create namespaces here ({detail})")
            bwrap = None
    else:
        notes.append("bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    level = possible[0]
    if level == "process" and not root:
        notes.append(
            "not root: candidates run as this user (enable unprivileged user namespaces, e.g. "
            "sysctl kernel.unprivileged_userns_clone=1, for the sandbox level)"
        )
    if not prlimit:
        notes.append("prlimit (util-linux) is missing: no per-process limits on processes or file size")
    if not root:
        notes.append(f"{NO_MEMORY_CAP}, no pids.max and no freezer: cgroups are used only as root")
    elif cgroup is None:
        notes.append(f"{NO_MEMORY_CAP}, no pids.max and no freezer: no writable cgroup v2 hierarchy")
    elif not _memory_capable(cgroup):
        notes.append(
            f"{NO_MEMORY_CAP}: the memory controller is not delegated to {cgroup} and no cgroup v1 "
            "memory hierarchy is writable"
        )
    forced = policy.isolation
    if forced != "auto":
        if forced not in possible:
            raise IsolationUnavailable(
                f"isolation {forced} is not possible on this machine (possible: "
                f"{', '.join(possible)}); see stark-mcp doctor"
            )
        if forced != level:
            notes = [n for n in notes if "bubblewrap" not in n] + [
                f"forced to {forced} by the isolation setting"
            ]
            level = forced
    if level != "sandbox":
        bwrap = None
    info = IsolationInfo(
        level=level,
        bwrap=bwrap,
        setpriv=setpriv if root else None,
        prlimit=prlimit,
        root=root,
        userns=userns,
        cgroup=cgroup,
        notes=notes,
        possible=tuple(possible),
        uid_base=policy.uid_base,
    )
    _cached[policy] = info
    return info


def doctor_lines(info: IsolationInfo) -> list[str]:
    """What ``stark-mcp doctor`` prints about isolation: the level, what it guarantees, how to raise it."""
    meaning = {
        "sandbox": "candidates run in bubblewrap: own PID/mount/network namespaces, read-only system, "
        "private scratch, no network",
        "uid": "candidates run as a uid of their own: they cannot write your files or signal your processes, "
        "but they share the network and see the filesystem",
        "process": "candidates run as you: they can read and write whatever you can; results and baselines "
        "are never reused from the caches at this level",
    }
    lines = [f"isolation: {info.level}", f"  {meaning[info.level]}"]
    lines.append(
        f"  bubblewrap: {info.bwrap or 'not usable'}; root: {'yes' if info.root else 'no'}; "
        f"cgroup v2: {info.cgroup or 'not available'}"
    )
    lines += [f"  note: {n}" for n in info.notes]
    return lines
