"""Who owns a jail's files and who may read them: a tree given to the jail's uid before it starts,
taken back before what it wrote enters a cache, and the folder that would keep its uid from
importing under a root. Standard library only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from stark_mcp.evaluator.sandbox.layout import ALWAYS_HIDDEN, SCRATCH_INSIDE, existing_dirs


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
