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

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

LEVELS = ("sandbox", "uid", "process")
FORCE_ENV = "STARK_ISOLATION"  # force a weaker level (tests, or a machine where the probe lies)
BWRAP_ENV = "STARK_BWRAP"  # path to a bwrap binary (default: the one on PATH)
PROBE_TIMEOUT_S = 20.0


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

    @property
    def note(self) -> str:
        """Why the level is not ``sandbox`` (empty when it is); ``doctor`` shows every note."""
        return "" if self.level == "sandbox" else "; ".join(self.notes)


def _run_ok(argv: list[str]) -> tuple[bool, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
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
        if os.path.exists(os.path.join(base, "cgroup.procs")) and os.path.exists(
                os.path.join(base, "cgroup.subtree_control")) and os.access(base, os.W_OK):
            return base
    return None


def _bwrap_probe(bwrap: str, setpriv: str | None, root: bool) -> tuple[bool, bool, str]:
    """(works as we will run it, works unprivileged, detail)."""
    base = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
            "--unshare-net", "--die-with-parent", "--new-session"]
    if root:
        ok, detail = _run_ok(base + ["--", setpriv or "setpriv", "--reuid=65534", "--regid=65534",
                                     "--clear-groups", "true"] if setpriv else base + ["true"])
        return ok, False, detail
    ok, detail = _run_ok([bwrap, "--unshare-user", *base[1:], "true"])
    return ok, ok, detail


_cached: IsolationInfo | None = None


def detect(refresh: bool = False) -> IsolationInfo:
    """The strongest level this process can use (``STARK_ISOLATION`` may force a weaker one)."""
    global _cached
    if _cached is not None and not refresh:
        return _cached
    root = os.geteuid() == 0
    bwrap = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
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
        notes.append("the Python environment is not readable by other users, so candidates cannot run as a "
                     "uid of their own outside a sandbox")
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
        notes.append("not root: candidates run as this user (enable unprivileged user namespaces, e.g. "
                     "sysctl kernel.unprivileged_userns_clone=1, for the sandbox level)")
    if not prlimit:
        notes.append("prlimit (util-linux) is missing: no per-process limits on processes or file size")
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced:
        if forced not in LEVELS:
            raise ValueError(f"{FORCE_ENV}={forced!r}: choose one of {', '.join(LEVELS)}")
        if forced not in possible:
            raise ValueError(f"{FORCE_ENV}={forced} is not possible on this machine (possible: "
                             f"{', '.join(possible)})")
        if forced != level:
            notes = [n for n in notes if "bubblewrap" not in n] + [f"forced to {forced} by {FORCE_ENV}"]
            level = forced
    if level != "sandbox":
        bwrap = None
    _cached = IsolationInfo(level=level, bwrap=bwrap, setpriv=setpriv if root else None, prlimit=prlimit,
                            root=root, userns=userns, cgroup=cgroup, notes=notes, possible=tuple(possible))
    return _cached


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
    lines.append(f"  bubblewrap: {info.bwrap or 'not usable'}; root: {'yes' if info.root else 'no'}; "
                 f"cgroup v2: {info.cgroup or 'not available'}")
    lines += [f"  note: {n}" for n in info.notes]
    return lines
