"""Writing a JSON file so that readers see the old file or the new one, never half of one
(parent side; the caches, their manifests and the probe's record use it)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any) -> None:
    """Write then rename, with a temp name unique per call: concurrent writers in one
    process (coroutines sharing a pid) must not rename each other's temp file away."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)
