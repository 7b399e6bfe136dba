"""What a sandboxed process sees of the filesystem, as a list of mount steps (pure).

One plan serves both launchers: ``bwrap_args`` renders it as bubblewrap's arguments, and the
forked launcher (``enter.py``) performs the same steps itself after a fork. Steps run in order;
each one names the path the jailed process sees (``dest``) and, for binds, the host path (``src``).
Standard library only.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

SCRATCH_INSIDE = "/tmp"
# Replaced by an empty tmpfs in the sandbox (with the home directory and the settings' hidden ones).
ALWAYS_HIDDEN = ("/home", "/root", "/var/tmp", "/run/user", "/dev/shm")
KINDS = ("ro-bind", "bind", "dev-bind", "tmpfs", "dir", "proc", "dev")


@dataclass(frozen=True)
class MountStep:
    kind: str  # one of KINDS
    dest: str
    src: str | None = None  # binds only
    perms: int | None = None  # tmpfs and dir
    size: int | None = None  # tmpfs

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "dest": self.dest, "src": self.src, "perms": self.perms, "size": self.size}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> MountStep:
        step = cls(
            kind=str(data["kind"]),
            dest=str(data["dest"]),
            src=None if data.get("src") is None else str(data["src"]),
            perms=None if data.get("perms") is None else int(data["perms"]),  # type: ignore[arg-type]
            size=None if data.get("size") is None else int(data["size"]),  # type: ignore[arg-type]
        )
        if step.kind not in KINDS or not step.dest.startswith("/"):
            raise ValueError(f"not a mount step: {data!r}")
        return step


def jail_layout(
    mounts: list[tuple[str, str, bool]],
    gpu_nodes: list[str],
    hidden: list[str],
    visible: list[str],
    scratch_bytes: int,
) -> list[MountStep]:
    """The sandbox's filesystem: the host read-only, its own /dev and /proc, the GPU's nodes, hidden
    folders emptied, Python and the import roots bound again where they were hidden, a size-capped
    scratch on /tmp, then ``mounts`` (host path, path inside, writable) on top."""
    steps = [MountStep("ro-bind", "/", "/"), MountStep("dev", "/dev"), MountStep("proc", "/proc")]
    for node in gpu_nodes:
        steps.append(MountStep("dev-bind", node, node))
    if gpu_nodes and os.path.isdir("/dev/nvidia-caps"):
        steps.append(MountStep("dev-bind", "/dev/nvidia-caps", "/dev/nvidia-caps"))
    hidden_dirs = existing_dirs([*ALWAYS_HIDDEN, os.path.expanduser("~"), *hidden])
    steps += [MountStep("tmpfs", path, perms=0o755) for path in hidden_dirs]
    made: set[str] = set()
    rebound = _rebinds(hidden_dirs, visible)
    for path in rebound:
        steps += _parent_dirs(path, hidden_dirs, made) + [MountStep("ro-bind", path, path)]
    steps.append(MountStep("tmpfs", SCRATCH_INSIDE, perms=0o1777, size=scratch_bytes))
    # Import roots (and Python paths) under /tmp would vanish under the scratch: bound again on top.
    scratch_rebound = _rebinds([SCRATCH_INSIDE], visible)
    for path in scratch_rebound:
        steps += _parent_dirs(path, [SCRATCH_INSIDE], made) + [MountStep("ro-bind", path, path)]
    # A hidden directory inside a folder bound again (a data directory in the project) stays hidden.
    for path in hidden_dirs:
        if any(path.startswith(r + "/") for r in [*rebound, *scratch_rebound]):
            steps.append(MountStep("tmpfs", path, perms=0o755))
    for src, dest, writable in mounts:
        steps += _parent_dirs(dest, [SCRATCH_INSIDE], made)
        steps.append(MountStep("bind" if writable else "ro-bind", dest, src))
    return steps


def bwrap_args(steps: list[MountStep]) -> list[str]:
    """The same steps as bubblewrap's options, in order."""
    out: list[str] = []
    for step in steps:
        if step.perms is not None:
            out += ["--perms", f"{step.perms:04o}"]
        if step.size is not None:
            out += ["--size", str(step.size)]
        if step.kind in ("ro-bind", "bind", "dev-bind"):
            out += [f"--{step.kind}", str(step.src), step.dest]
        else:
            out += [f"--{step.kind}", step.dest]
    return out


def existing_dirs(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        real = os.path.realpath(p)
        if os.path.isdir(real) and real != "/" and real not in out:
            out.append(real)
    # a hidden parent already hides its children; keep the outermost only
    return [p for p in out if not any(p != q and p.startswith(q + "/") for q in out)]


def _python_paths() -> list[str]:
    import site

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    try:
        paths.update(site.getsitepackages())
    except AttributeError:
        pass
    # Not the directory we were started from, nor the script's: they are on sys.path by accident of
    # how the process was started (``python -m`` from a project, a script in /tmp), not because
    # torch or stark-mcp need them, and a candidate would read them through the re-bind.
    incidental = {os.path.realpath(os.getcwd())}
    if sys.argv and sys.argv[0]:
        incidental.add(os.path.dirname(os.path.realpath(sys.argv[0])))
    paths.update(p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) not in incidental)
    here = Path(__file__).resolve()
    paths.add(str(here.parents[3]))  # the directory holding the stark_mcp package
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            paths.add(os.environ[var])
    return sorted(os.path.realpath(p) for p in paths if p)


def _rebinds(hidden: list[str], visible: list[str]) -> list[str]:
    """Paths under a hidden directory that must stay readable: Python, its packages, import roots."""
    wanted = [os.path.realpath(p) for p in [*_python_paths(), *visible] if os.path.exists(p)]
    # Strictly under: binding a hidden directory itself again (/tmp, the home) would undo the hiding.
    under = [p for p in wanted if any(p.startswith(h.rstrip("/") + "/") for h in hidden)]
    under = sorted(set(under))
    return [p for p in under if not any(p != q and p.startswith(q + "/") for q in under)]


def _parent_dirs(path: str, roots: list[str], made: set[str]) -> list[MountStep]:
    """A ``dir`` step for each directory between a tmpfs root and ``path``: bubblewrap would make them
    0700, which a sandbox uid cannot traverse."""
    root = next((r for r in roots if path.startswith(r.rstrip("/") + "/")), None)
    if root is None:
        return []
    out: list[MountStep] = []
    parts = Path(path).relative_to(root).parts[:-1]
    current = Path(root)
    for part in parts:
        current = current / part
        if str(current) not in made:
            made.add(str(current))
            out.append(MountStep("dir", str(current), perms=0o755))
    return out
