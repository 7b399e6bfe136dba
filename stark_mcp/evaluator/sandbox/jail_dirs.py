"""Writing into (and reading from) a directory a jail can write, without ever following a link it
planted there.

A builder jail writes its own build directory, and the parent then writes into that same directory
(the prebuilt index, the libraries it built). Paths the parent opens there by name are the
candidate's to choose: a symlink named ``extensions.json`` would have the parent (root) write through
it to any file of the host. Here every component is opened relative to the one before with
``O_NOFOLLOW``; a link or a file where a directory is needed is removed, a name about to be written
is unlinked first and then created exclusively, so a link planted again in between makes the write
fail (``JailPathError``) instead of landing elsewhere. A file the parent reads there (the init file a
problem's reference jail saves) is opened the same way and must be a regular file of bounded size:
a link to a host file would have the worker hand that file to the runners. Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
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


def read_bytes(root: Path, relative: str, limit: int) -> bytes:
    """The bytes of the regular file ``root/relative``, following no link below ``root`` (ours);
    ``JailPathError`` for a link, anything but a regular file, or more than ``limit`` bytes."""
    parts = Path(relative).parts
    if not parts or any(p in ("", ".", "..") or "/" in p for p in parts) or Path(relative).is_absolute():
        raise JailPathError(errno.EINVAL, f"not a plain relative path: {relative!r}")
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                where = f"{relative}: {part} is not a folder"
                raise JailPathError(exc.errno or errno.ENOTDIR, where) from exc
            os.close(fd)
            fd = child
        try:
            file = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError as exc:
            raise JailPathError(exc.errno or errno.ENOENT, f"{relative}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    try:
        info = os.fstat(file)
        if not stat.S_ISREG(info.st_mode):
            raise JailPathError(errno.EINVAL, f"{relative}: not a regular file")
        if info.st_size > limit:
            raise JailPathError(errno.EFBIG, f"{relative}: {info.st_size} bytes, more than {limit}")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(file, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise JailPathError(errno.EFBIG, f"{relative}: more than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(file)


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
