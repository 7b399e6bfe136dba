"""The folders a remote or host client's paths must stay in, and a write that cannot leave them.

The MCP server takes paths from whoever holds its connection (over ``serve --http``, anyone with
the token), so every path argument resolves inside its roots: the working folder it started in plus
each ``--root``. A path is resolved first (``..`` and every symlink, parents and the final target)
and checked after, so ``../../etc/x.py``, ``/etc/x.py`` and a symlink pointing out are all refused.
Between the check and a write a folder could be swapped for a symlink, so ``write_confined`` walks
down from the root to the folder without following any symlink (openat-style, one descriptor per
component) and creates a temporary file in it with ``O_NOFOLLOW | O_EXCL`` that a rename relative
to that descriptor puts in place.

The CLI takes no ``AllowedRoots``: its user's paths are their own.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from stark_mcp.orchestrator.errors import InvalidInput


class PathOutsideRoots(InvalidInput):
    """A client's path resolves outside the server's allowed roots."""


@dataclass(frozen=True)
class AllowedRoots:
    """Resolved folders; the first is where relative paths start (the server's working folder).

    ``problem_sources``: whether a problem may be given as text at every isolation level. A problem's
    code runs only in its reference jail; at the ``sandbox`` and ``uid`` levels that jail walls it off
    from the server's user, and a problem given as text is taken there. At the ``process`` level the
    jail is the server's user, so by default only problem files already inside the roots run there,
    which the server's owner put there (a remote client can write none: ``create_problem`` writes
    only rendered problems); ``problem_sources`` takes text there too.
    """

    folders: tuple[Path, ...]
    problem_sources: bool = False

    @classmethod
    def of(
        cls, folders: Iterable[str | Path], cwd: Path | None = None, *, problem_sources: bool = False
    ) -> AllowedRoots:
        start = (cwd or Path.cwd()).resolve()
        resolved = [start]
        for folder in folders:
            path = Path(folder).expanduser()
            path = (path if path.is_absolute() else start / path).resolve()
            if not path.is_dir():
                raise InvalidInput(f"root {folder} is not a folder")
            if path not in resolved:
                resolved.append(path)
        return cls(tuple(resolved), problem_sources)

    def describe(self) -> str:
        return ", ".join(str(f) for f in self.folders)

    def contains(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.folders)

    def resolve(self, given: str | Path, what: str = "path") -> Path:
        """``given`` with ``..`` and symlinks resolved, relative to the first root; PathOutsideRoots
        unless the result lies inside a root."""
        text = str(given)
        if "\x00" in text:
            raise InvalidInput(f"{what} contains a NUL character")
        path = Path(text)
        if not path.is_absolute():
            path = self.folders[0] / path
        resolved = path.resolve()
        if not self.contains(resolved):
            raise PathOutsideRoots(
                f"{what} {text!r} is outside the folders this server may use ({self.describe()}); "
                "give a path inside one of them, or start the server with --root FOLDER"
            )
        return resolved


_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


def _open_folder(folder: Path, roots: AllowedRoots | None) -> int:
    """A descriptor of ``folder``, made if missing. With ``roots`` it is walked down from the root
    holding it one component at a time (mkdir and open relative to the parent's descriptor, never
    following a symlink), so a folder swapped for a symlink after the check is refused."""
    if roots is None:
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, _FOLDER)
    root = next((r for r in roots.folders if folder == r or folder.is_relative_to(r)), None)
    if root is None:
        raise PathOutsideRoots(f"{folder} is outside the folders this server may use ({roots.describe()})")
    fd = os.open(root, _FOLDER)
    try:
        for part in folder.relative_to(root).parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            child = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError as exc:
        os.close(fd)
        # O_NOFOLLOW | O_DIRECTORY on a symlink: ELOOP or ENOTDIR, by the kernel's path.
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathOutsideRoots(
                f"{folder} leads through a symlink or a file; give a folder path without one"
            ) from None
        raise
    return fd


def write_confined(path: Path, text: str, roots: AllowedRoots | None) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file renamed over it). With ``roots``,
    ``path`` must be a path ``roots.resolve`` returned: its folder is reached from its root without
    following any symlink, and the file is created (``O_EXCL | O_NOFOLLOW``) and renamed relative
    to that folder's descriptor, so a symlink swapped in after the check cannot redirect the write."""
    folder = _open_folder(path.parent, roots)
    try:
        partial = f".{path.name}.{secrets.token_hex(4)}.partial"
        fd = os.open(
            partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644,
            dir_fd=folder,
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(partial, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(partial, dir_fd=folder)
            except OSError:
                pass
            raise
    finally:
        os.close(folder)
