"""On-disk caches: evaluation results and baseline timings (JSON files, atomic replace)."""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from stark_mcp.records import Evaluation, Status

UNCACHED_STATUSES = {Status.TIMEOUT}  # may come from a loaded machine: worth trying again


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_")[:80] or "x"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write then rename, with a temp name unique per call: concurrent writers in one
    process (coroutines sharing a pid) must not rename each other's temp file away."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


class ResultCache:
    """``<root>/<problem_hash>/<source_hash>-<device>-<settings_hash>.json``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, problem_hash: str, source_hash: str, device_name: str, settings_hash: str) -> Path:
        return self.root / problem_hash / f"{source_hash}-{slug(device_name)}-{settings_hash}.json"

    def get(self, key: tuple[str, str, str, str]) -> Evaluation | None:
        try:
            return Evaluation.model_validate_json(self.path(*key).read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: tuple[str, str, str, str], evaluation: Evaluation) -> None:
        if evaluation.status in UNCACHED_STATUSES:
            return
        write_json_atomic(self.path(*key), evaluation.model_dump(mode="json", exclude={"cached"}))


class BaselineCache:
    """``<root>/<problem_hash>-<device>-<torch>-<timing_hash>.json``: name -> stats or a missing note."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, problem_hash: str, device_name: str, torch_version: str, timing_hash: str) -> Path:
        return self.root / f"{problem_hash}-{slug(device_name)}-{slug(torch_version)}-{timing_hash}.json"

    def load(self, path: Path) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def store(self, path: Path, entries: dict[str, dict[str, Any]]) -> None:
        write_json_atomic(path, entries)
