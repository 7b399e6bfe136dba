"""On-disk caches written only by the parent: evaluation results and baseline timings.

Every entry carries an HMAC (``integrity.py``) and is ignored when it does not verify. Entries are
keyed by content (problem hash, source hash, device, settings, isolation level, and the digest of
everything else the verdict depends on: ``verdict_dependencies.py``), written atomically,
and never reused when evaluations run at the ``process`` isolation level, where a candidate runs as
this user and could have written them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from stark_mcp.evaluator.host.atomic_files import write_json_atomic
from stark_mcp.evaluator.host.integrity import Integrity
from stark_mcp.records import Evaluation, Status, TimingStats

UNCACHED_STATUSES = {Status.TIMEOUT}  # may come from a loaded machine: worth trying again


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_")[:80] or "x"


class _Signed:
    def __init__(self, root: Path, integrity: Integrity, reuse: bool) -> None:
        self.root, self.integrity, self.reuse = root, integrity, reuse

    def _read(self, path: Path) -> Any | None:  # free-form: a verified file's JSON, before validation
        if not self.reuse:
            return None
        try:
            wrapper = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(wrapper, dict) or not self.integrity.verify(
            wrapper.get("data"), wrapper.get("sig")
        ):
            return None
        return wrapper["data"]

    def _write(self, path: Path, data: object) -> None:
        write_json_atomic(path, {"data": data, "sig": self.integrity.sign(data)})


class ResultCache(_Signed):
    """``<root>/<problem_hash>/<source_hash>-<device>-<settings_hash>-<isolation>-<dependencies>.json``."""

    def path(self, key: tuple[str, ...]) -> Path:
        problem_hash, *rest = key
        return self.root / problem_hash / ("-".join(slug(k) for k in rest) + ".json")

    def get(self, key: tuple[str, ...]) -> Evaluation | None:
        data = self._read(self.path(key))
        if data is None:
            return None
        try:
            return Evaluation.model_validate(data)
        except ValueError:
            return None

    def put(self, key: tuple[str, ...], evaluation: Evaluation) -> None:
        if evaluation.status in UNCACHED_STATUSES:
            return
        self._write(self.path(key), evaluation.model_dump(mode="json", exclude={"cached", "reevaluated"}))

    def previous(self, key: tuple[str, ...]) -> Evaluation | None:
        """The newest valid result for the same problem and source under any other key: what a miss
        compares its dependencies with, to say what changed."""
        if not self.reuse:
            return None
        own = self.path(key)
        try:
            found = sorted(
                (p for p in own.parent.glob(f"{slug(key[1])}-*.json") if p != own),
                key=lambda p: p.stat().st_mtime,
                reverse=True,
            )
        except OSError:
            return None
        for path in found[:20]:
            data = self._read(path)
            if data is None:
                continue
            try:
                return Evaluation.model_validate(data)
            except ValueError:
                continue
        return None


class BaselineShape(BaseModel):
    """One declared shape of a timed baseline: its stats, and eager's measured beside it (what a
    later candidate's eager is compared with before the cached figure is used)."""

    label: str
    stats: TimingStats
    eager: TimingStats | None = None  # None: an entry from before eager was kept beside each shape


class BaselineEntry(BaseModel):
    """One baseline of the baseline cache: timed per shape, or ``missing`` saying why it could not be."""

    missing: str | None = None
    shapes: list[BaselineShape] | None = None
    mode: str | None = None
    first_calls_s: float | None = None  # a compiled mode's compilation (eager has none)

    @property
    def timed(self) -> bool:
        return self.shapes is not None

    def to_json(self) -> dict[str, object]:
        """The entry as the cache file holds it (and its signature covers): ``{"missing": ...}``, or
        the shapes, the mode and ``first_calls_s`` (null included)."""
        if self.shapes is None:
            return {"missing": self.missing or ""}
        return {
            "shapes": [
                {
                    "label": s.label,
                    "stats": s.stats.model_dump(mode="json"),
                    **({"eager": s.eager.model_dump(mode="json")} if s.eager is not None else {}),
                }
                for s in self.shapes
            ],
            "mode": self.mode,
            "first_calls_s": self.first_calls_s,
        }


class BaselineCache(_Signed):
    """``<root>/<problem_hash>-<device>-<torch>-<timing_hash>-<stack>.json``: name -> entry or a missing
    note; ``stack`` is ``verdict_dependencies.stack_tag``: the evaluator's code, CUDA, the driver, the
    user's files."""

    def path(
        self, problem_hash: str, device_name: str, torch_version: str, timing_hash: str, stack: str
    ) -> Path:
        name = f"{problem_hash}-{slug(device_name)}-{slug(torch_version)}-{timing_hash}-{stack}.json"
        return self.root / name

    def load(self, path: Path) -> dict[str, BaselineEntry]:
        """The verified entries of ``path``; one off the entry schema is left out (timed again)."""
        data = self._read(path)
        entries: dict[str, BaselineEntry] = {}
        for name, entry in (data if isinstance(data, dict) else {}).items():
            try:
                entries[str(name)] = BaselineEntry.model_validate(entry)
            except ValidationError:
                continue
        return entries

    def store(self, path: Path, entries: dict[str, BaselineEntry]) -> None:
        self._write(path, {name: entry.to_json() for name, entry in entries.items()})
