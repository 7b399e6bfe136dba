"""Writing into a directory a jail can write, without ever following a link it planted there.

A builder jail writes its own build directory, and the parent then writes into that same directory
(the prebuilt index, the libraries it built). Paths the parent opens there by name are the
candidate's to choose: a symlink named ``extensions.json`` would have the parent (root) write through
it to any file of the host. Here every component is opened relative to the one before with
``O_NOFOLLOW``; a link or a file where a directory is needed is removed, a name about to be written
is unlinked first and then created exclusively, so a link planted again in between makes the write
fail (``JailPathError``) instead of landing elsewhere. Standard library only.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class JailPathError(OSError):
    """Something in a jail's directory kept the parent from writing where it meant to."""


def write_bytes(root: Path, relative: str, data: bytes, mode: int = 0o644) -> None:
    """``data`` into ``root/relative``; ``root`` is ours, everything below it may be the jail's."""
    parts = Path(relative).parts
    if not parts or any(p in ("", ".", "..") or "/" in p for p in parts) or Path(relative).is_absolute():
        raise JailPathError(errno.EINVAL, f"not a plain relative path: {relative!r}")
    folder = _open_folder(root, parts[:-1])
    try:
        name = parts[-1]
        try:
            os.unlink(name, dir_fd=folder)
        except FileNotFoundError:
            pass
        except (IsADirectoryError, PermissionError) as exc:
            raise JailPathError(errno.EISDIR, f"{relative}: a directory where a file is written") from exc
        try:
            fd = os.open(name, _NEW_FILE, mode, dir_fd=folder)
        except FileExistsError as exc:
            raise JailPathError(errno.EEXIST, f"{relative}: replaced while it was being written") from exc
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    finally:
        os.close(folder)


def copy_file(source: Path, root: Path, relative: str, mode: int = 0o644) -> None:
    """A file of ours (``source``) into ``root/relative``, as ``write_bytes`` writes."""
    write_bytes(root, relative, source.read_bytes(), mode)


def _open_folder(root: Path, parts: tuple[str, ...]) -> int:
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                os.unlink(part, dir_fd=fd)  # a link or a file where our directory goes: the jail's
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise
