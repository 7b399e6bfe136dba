"""The run's one toolchain directory: tests/conftest.py points ``STARK_TOOLCHAIN_DIR`` at it in every
xdist worker before any test, so CLIs the tests start inherit it and evaluators the tests open take it
from ``shared_toolchain()``. The precompiled torch header (about a minute of CPU on a 2-core machine)
is then made once per run, not once per fresh cache; tests of how a toolchain directory is filled use
a fresh one of their own."""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "STARK_TOOLCHAIN_DIR"


def shared_toolchain() -> Path:
    return Path(os.environ[VARIABLE])


def headers_made_with(*flags: str) -> list[str]:
    """The run's precompiled-header folders whose compile command holds ``flags`` (in order), for a
    build outside the evaluator (torch's own ``load_inline``) to find through ``CPATH``: GCC uses a
    ``.gch`` only where it is valid for the compile's exact flags, and otherwise the header copy
    beside it, which is torch's own header byte for byte."""
    wanted = " ".join(flags)
    found = []
    for command in sorted(shared_toolchain().glob("pch/*/command.txt")):
        if f" {wanted} -x c++-header " in command.read_text():
            found.append(str(command.parent))
    return found
