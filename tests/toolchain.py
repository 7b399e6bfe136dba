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
