"""Precompiled headers for the host C++ file, shared by every build with the same compiler and flags.

GCC looks for ``<dir>/torch/extension.h.gch`` in each include directory just before it looks for
``<dir>/torch/extension.h``, uses it only if it was made with compatible options (and says so
under ``-Winvalid-pch``), and otherwise goes on to the real header. So a directory holding only
the ``.gch`` put first on the include path speeds up a source whose first include is that header
and cannot change what any source means.

The ``.gch`` is made from the header alone by trusted code, keyed by the compiler, its flags
(minus the per-extension ``TORCH_EXTENSION_NAME``, which no torch header uses) and the header
file's identity, and never from a request that names its own include paths or forced includes.

Beside the ``.gch`` lies a byte-identical copy of the header (same mtime). A source that includes the
header a second time (``load_inline`` writes the include, and most candidates write it again) has
GCC look for the header itself in the directory the precompiled one came from: without the copy
that second include was a fatal "No such file", and every such build fell back to a full compile.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .request import PATH_FLAGS

PCH_HEADERS: tuple[str, ...] = ("torch/extension.h",)
LAYOUT = "gch+header"  # what a key's directory holds; directories of an older layout are not used
_FIRST_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<([^>]+)>")


@dataclass
class PchResult:
    flags: list[str]  # to append to the compile command; empty when no PCH applies
    header: str | None = None
    path: str | None = None
    built_seconds: float | None = None  # set when this call made the .gch
    reason: str = ""


def first_include(text: str) -> str | None:
    """The header named by the first line that is code, if it is an ``#include <...>``."""
    in_block = False
    for line in text.splitlines():
        stripped = line.strip()
        if in_block:
            if "*/" in stripped:
                in_block = False
                stripped = stripped.split("*/", 1)[1].strip()
            else:
                continue
        if not stripped or stripped.startswith("//"):
            continue
        if stripped.startswith("/*"):
            if "*/" not in stripped:
                in_block = True
                continue
            stripped = stripped.split("*/", 1)[1].strip()
            if not stripped:
                continue
        match = _FIRST_INCLUDE.match(stripped)
        return match.group(1).strip() if match else None
    return None


def user_flags_allow_pch(
    extra_cflags: tuple[str, ...] | list[str], extra_include_paths: tuple[str, ...]
) -> bool:
    """The request adds no include directories, forced includes or response files of its own."""
    if extra_include_paths:
        return False
    words: list[str] = []
    for flag in extra_cflags:
        try:
            words += shlex.split(flag)
        except ValueError:
            return False
    return not any(w.startswith("@") or any(w.startswith(f) for f in PATH_FLAGS) for w in words)


def pch_key(compiler_words: list[str], flags: list[str], header_path: str, compiler_version: str) -> str:
    st = os.stat(header_path)
    blob = "\0".join(
        [LAYOUT, *compiler_words, *flags, header_path, str(st.st_size), str(st.st_mtime_ns), compiler_version]
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def blames_pch(output: str, made: PchResult) -> bool:
    """Whether a failed compile's output points at the precompiled header rather than the source."""
    directory = made.flags[0].removeprefix("-I") if made.flags else None
    lowered = output.lower()
    return (
        ".gch" in lowered
        or "invalid-pch" in lowered
        or "precompiled" in lowered
        or bool(directory and directory in output)
        or "error" not in lowered  # killed, or a crash without a diagnostic: try once more without it
    )


def pch_flags(flags: list[str]) -> list[str]:
    """The compile flags that must match between the ``.gch`` and its users."""
    out: list[str] = []
    skip = False
    for word in flags:
        if skip:
            skip = False
            continue
        if word in ("-MF", "-MT", "-MQ", "-o"):
            skip = True
            continue
        if word in ("-MMD", "-MD", "-c", "-MP") or word.startswith("-DTORCH_EXTENSION_NAME="):
            continue
        out.append(word)
    return out


def find_header(header: str, include_dirs: list[str]) -> str | None:
    for directory in include_dirs:
        path = os.path.join(directory, header)
        if os.path.isfile(path):
            return path
    return None


def ensure_pch(
    pch_root: str,
    compiler_words: list[str],
    compile_flags: list[str],
    header: str,
    include_dirs: list[str],
    compiler_version: str,
    timeout: float = 900.0,
    make: bool = True,
) -> PchResult:
    """Make (once) or find the ``.gch`` of ``header`` for these flags; return the flags that use it.

    ``make=False``: only find it (a compile jail reads a directory that trusted code fills)."""
    header_path = find_header(header, include_dirs)
    if header_path is None:
        return PchResult([], reason=f"{header} not found in torch's include directories")
    flags = pch_flags(compile_flags)
    key = pch_key(compiler_words, flags, header_path, compiler_version)
    directory = os.path.join(pch_root, key)
    gch = os.path.join(directory, header + ".gch")
    use = [f"-I{directory}", "-Winvalid-pch"]
    if os.path.exists(gch):
        return PchResult(use, header=header, path=gch)
    if not make:
        return PchResult([], reason=f"no precompiled header made for these flags yet ({key})")
    os.makedirs(os.path.dirname(gch), exist_ok=True)
    with exclusive(os.path.join(directory, ".lock")):  # concurrent first builds wait for one maker
        if os.path.exists(gch):
            return PchResult(use, header=header, path=gch)
        _remove_leftovers(os.path.dirname(gch))
        return _make(use, compiler_words, flags, header, header_path, gch, directory, timeout)


def _remove_leftovers(directory: str) -> None:
    """What a maker killed mid-way left (the header is made in the background, and stopped when its
    evaluator closes): a partial ``.gch`` is hundreds of MB. Only a lock holder calls this, so no
    other maker is writing one."""
    for entry in os.listdir(directory):
        if entry.endswith((".gch.tmp", ".h.tmp")):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, entry))


@contextlib.contextmanager
def exclusive(lock_path: str) -> Iterator[None]:
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _copy_header(header_path: str, dest: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), suffix=".h.tmp")
    os.close(fd)
    shutil.copy2(header_path, tmp)  # the mtime too: GCC's #pragma once compares it
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)


def _make(
    use: list[str],
    compiler_words: list[str],
    flags: list[str],
    header: str,
    header_path: str,
    gch: str,
    directory: str,
    timeout: float,
) -> PchResult:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(gch), suffix=".gch.tmp")
    os.close(fd)
    start = time.monotonic()
    cmd = [*compiler_words, *flags, "-x", "c++-header", header_path, "-o", tmp]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        os.unlink(tmp)
        return PchResult([], reason=f"making the PCH failed: {shlex.join(cmd)[:200]}: {done.stderr[-500:]}")
    os.chmod(tmp, 0o644)  # compile jails run as another uid: a 0600 header was silently not used
    _copy_header(header_path, os.path.join(directory, header))  # before the .gch: it marks the set done
    os.replace(tmp, gch)
    with open(os.path.join(directory, "command.txt"), "w") as fh:
        fh.write(shlex.join(cmd) + "\n")
    return PchResult(use, header=header, path=gch, built_seconds=time.monotonic() - start)
