"""Where the outside tools that wrap a runner after an evaluation live: Nsight Compute (profiles) and
compute-sanitizer (memory errors). Standard library only.

The parent builds a ``ToolPaths`` from its settings (``STARK_NCU``, ``STARK_COMPUTE_SANITIZER``) and
hands it to the worker on its command line, like the ``SandboxPolicy``: no process below reads the
environment for it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass

TOOLS = ("ncu", "compute-sanitizer")
OFF = ("off", "none", "0", "false")


@dataclass(frozen=True)
class ToolPaths:
    """Each tool: ``None`` to look it up, a path to use that binary, or ``off`` to do without it."""

    ncu: str | None = None
    compute_sanitizer: str | None = None

    def find(self, name: str) -> str | None:
        """The binary to run for ``name`` (``ncu`` or ``compute-sanitizer``), or None when it is
        turned off, missing, or not executable. Looked up on PATH, then under CUDA_HOME,
        CUDA_PATH and /usr/local/cuda (where the toolkit puts both)."""
        forced = (getattr(self, name.replace("-", "_")) or "").strip()
        if forced:
            if forced.lower() in OFF:
                return None
            return forced if os.access(forced, os.X_OK) else None
        found = shutil.which(name)
        if found:
            return found
        for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if root and os.access(os.path.join(root, "bin", name), os.X_OK):
                return os.path.join(root, "bin", name)
        return None

    def missing(self, name: str) -> str:
        """Why ``find(name)`` found nothing, in a sentence for a profile's ``reason``."""
        forced = (getattr(self, name.replace("-", "_")) or "").strip()
        label = "Nsight Compute (ncu)" if name == "ncu" else name
        if forced.lower() in OFF:
            return f"{label} is turned off in the settings"
        if forced:
            return f"{label}: {forced} is not an executable"
        return f"{label} is not installed on this machine (not on PATH nor under CUDA_HOME)"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ToolPaths:
        return cls(**json.loads(text))
