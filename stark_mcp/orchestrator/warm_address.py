"""Where a warm evaluator compatible with this process listens: its key, its folder, its files.

A warm evaluator (``warm_evaluator.py``) serves only clients whose own evaluator would give the same
verdicts. The key is a digest of everything that decides them: the package's code (the evaluator's
digest and the rest of the package, whose records cross the socket), the Python executable, torch's
version, the settings that reach the evaluator (data, cache and toolchain locations made absolute,
isolation, GPUs, executor, outside tools) and the environment that reaches builds and jails (what
``scrub_env`` lets through: PATH, HOME, TMPDIR, LD_LIBRARY_PATH, PYTHONPATH, CUDA_*, TORCH_*,
TRITON_*, ...). The socket's name carries the key, so a different key is a different daemon and an
upgraded stark-mcp never talks to an old one.

The folder is machine-wide per user and independent of TMPDIR: ``$XDG_RUNTIME_DIR/stark-mcp``, else
(or where that variable names no folder) ``/tmp/stark-mcp-<uid>``. It is made 0700; one that is a
link, belongs to someone else or lets the group or others in is refused (``InsecureFolder``): its
socket could be anyone's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from stark_mcp.config import Settings
from stark_mcp.errors import StarkError
from stark_mcp.evaluator.host.device_probe import torch_version
from stark_mcp.evaluator.host.verdict_dependencies import evaluator_digest
from stark_mcp.evaluator.sandbox.env import scrub_env

PACKAGE = Path(__file__).resolve().parents[1]
# The settings that reach the evaluator (session.open_evaluator); the rest (LLM, prompts, the daemon's
# own idle time) change no verdict.
EVALUATOR_FIELDS = (
    "isolation", "bwrap", "sandbox_uid_base", "ncu", "compute_sanitizer", "gpus", "executor", "ray_address",
)
WHAT = "the warm evaluator's folder"
# Added by scrub_env itself, not by the caller's environment.
SCRUB_DEFAULTS = ("PYTHONUNBUFFERED",)


class InsecureFolder(StarkError):
    """The warm evaluator's folder could be used by someone else; the message says why."""


@dataclass(frozen=True)
class WarmAddress:
    key: str
    folder: Path

    @property
    def socket(self) -> Path:
        return self.folder / f"eval-{self.key}.sock"

    @property
    def lock(self) -> Path:
        """Held by the daemon for its whole life: whoever holds it serves this key."""
        return self.folder / f"eval-{self.key}.lock"

    @property
    def start_lock(self) -> Path:
        """Held by a client while it starts a daemon and waits for it: the others wait, then connect."""
        return self.folder / f"eval-{self.key}.start"

    @property
    def log(self) -> Path:
        return self.folder / f"eval-{self.key}.log"


def absolute(settings: Settings) -> Settings:
    """``settings`` with its data, database, cache and toolchain paths absolute (a daemon runs in its
    own folder, and serves clients from any directory)."""
    return settings.model_copy(update={
        "home": settings.home.expanduser().resolve(),
        "db_path": settings.database.resolve(),
        "cache_dir": settings.cache.resolve(),
        "toolchain_dir": settings.toolchain.resolve(),
    })


@functools.cache
def package_digest() -> str:
    """Every .py file of the package, by path and content (a superset of ``evaluator_digest``)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that reaches builds, jails and the evaluator's own look-ups (CUDA_HOME, CUDA_
    VISIBLE_DEVICES): what ``scrub_env`` keeps of it."""
    env = scrub_env(os.environ if environ is None else environ)
    for name in SCRUB_DEFAULTS:
        if (os.environ if environ is None else environ).get(name) is None:
            env.pop(name, None)
    return env


def compatibility_key(settings: Settings, environ: dict[str, str] | None = None) -> str:
    resolved = absolute(settings)
    parts = {
        "evaluator": evaluator_digest(),
        "package": package_digest(),
        "python": sys.executable,
        "torch": torch_version(),
        "home": str(resolved.home),
        "database": str(resolved.database),
        "cache": str(resolved.cache),
        "toolchain": str(resolved.toolchain),
        "settings": {name: str(getattr(resolved, name)) for name in EVALUATOR_FIELDS},
        "environment": sorted(environment(environ).items()),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def folder_path(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        return Path(runtime) / "stark-mcp"
    return Path("/tmp") / f"stark-mcp-{os.getuid()}"


def secure_folder(folder: Path) -> Path:
    """``folder``, made 0700 if missing; ``InsecureFolder`` if it is a link, someone else's, not a
    folder, or open to the group or others."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise InsecureFolder(f"cannot make {WHAT} {folder}: {exc.strerror or exc}") from None
    try:
        info = folder.lstat()
    except OSError as exc:
        raise InsecureFolder(f"cannot read {WHAT} {folder}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise InsecureFolder(f"{WHAT} {folder} is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise InsecureFolder(f"{WHAT} {folder} is not a folder")
    if info.st_uid != os.getuid():
        raise InsecureFolder(f"{WHAT} {folder} belongs to uid {info.st_uid}, not {os.getuid()}")
    if info.st_mode & 0o077:
        raise InsecureFolder(
            f"{WHAT} {folder} is open to others (mode {stat.S_IMODE(info.st_mode):o}, should be 700)"
        )
    return folder


def warm_address(settings: Settings) -> WarmAddress:
    """This process's warm evaluator address, its folder checked (``InsecureFolder``)."""
    return WarmAddress(compatibility_key(settings), secure_folder(folder_path()))
