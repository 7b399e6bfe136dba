"""Whether a file may be compiled with the light include set: its include profile (made by
``light.py``, keyed by the compile command without its input, output and name) must show none of the
source's identifiers among those only the full header declares. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

from . import light, pch
from .request import Toolchain

LIGHT_DEFAULT = light.LIGHT_SUBSTITUTES


def light_blocked(
    original: str,
    swapped: list[str],
    substitutes: dict[str, str],
    argv: list[str],
    source: str,
    pch_dir: str | None,
    toolchain: Toolchain,
    make_shared: bool = True,
    host: bool = False,
    wait: float = 0.0,
) -> str:
    if not pch_dir:
        return "no profile directory"
    pre = preprocess_argv(argv, source)
    for full in swapped:
        kind = ["host"] if host else []  # a host profile is keyed apart from an nvcc one
        blob = json.dumps([pre, full, substitutes[full], toolchain.fingerprint(), *kind])
        key = hashlib.sha256(blob.encode()).hexdigest()[:24]
        try:
            profile = light.load_or_make_profile(
                os.path.join(pch_dir, "light"), key, pre, full, substitutes[full],
                make=make_shared, host=host, wait=wait,
            )  # fmt: skip
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            return f"no profile: {exc}"[:300]
        clash = light.blocking_names(original, profile)
        if clash:
            return "names only the full header declares: " + ", ".join(clash[:8])
    return ""


def preprocess_argv(argv: list[str], source: str) -> list[str]:
    """The command minus input, output and the extension's name (no torch header reads
    ``TORCH_EXTENSION_NAME``), so one profile serves every extension built with these flags."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "-o":
            skip = True
            continue
        if word in ("-c", source) or word.startswith("-DTORCH_EXTENSION_NAME="):
            continue
        out.append(word)
    return out


def host_profile_argv(compiler: list[str], flags: list[str]) -> list[str]:
    """A host compile command as its include profile is keyed: no outputs, dependency files or name."""
    return [*compiler, *pch.pch_flags(flags)]
