"""Measured peaks and problem counts kept on disk (parent side), with the datasheet as fallback.

Only the parent writes these files, under the evaluator's cache directory that no jail can see, and
with a ``Signer`` (the evaluator's HMAC, ``evaluator/host/integrity.py``) each entry is signed and one
that does not verify is ignored, like every other cache entry.
Peaks are keyed by device name and torch version, counts by problem hash (the reference's bytes and
FLOPs do not depend on the device); the evaluator passes both a stack tag as well
(``evaluator/host/verdict_dependencies.stack_tag``: the evaluator's code, CUDA, the driver, the
user's files), so a new driver stack is measured again and changed counting rules or user code are
counted again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from stark_mcp.sol.model import Peaks
from stark_mcp.sol.published import published_peaks

log = logging.getLogger(__name__)
# Bumped whenever the counting rules (evaluator/reference/sol_count.py) change: older counts are ignored.
COUNTS_VERSION = "2"  # 2: float32 products torch runs as TF32 counted apart (matmul_tf32)
# A measured bandwidth or FLOP rate this far above the datasheet measured a cache, not the device.
IMPLAUSIBLE_OVER_PUBLISHED = 1.10


class Signer(Protocol):
    def sign(self, data: Any) -> str: ...

    def verify(self, data: Any, signature: object) -> bool: ...


class _Files:
    """JSON files under ``root``, written atomically, signed when a signer is given."""

    def __init__(self, root: Path, signer: Signer | None = None) -> None:
        self.root = Path(root)
        self.signer = signer

    def write(self, path: Path, data: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        wrapped = {"data": data, "sig": self.signer.sign(data) if self.signer else None}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(wrapped, f)
        os.replace(tmp, path)

    def read(self, path: Path) -> Any:
        try:
            wrapped = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(wrapped, dict):
            return None
        data = wrapped.get("data")
        if self.signer is not None and not self.signer.verify(data, wrapped.get("sig")):
            return None
        return data


def _slug(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def peaks_from_measurement(
    answer: dict[str, Any], device_name: str, kind: str, cache_bytes: int = 0
) -> Peaks:
    """A worker's ``calibrated`` answer as ``Peaks``, cross-checked against the datasheet: a figure
    above it by more than ``IMPLAUSIBLE_OVER_PUBLISHED`` is replaced by the published one."""
    published = published_peaks(device_name) if kind == "cuda" else None
    bandwidth = float(answer["bandwidth_bytes_per_s"])
    fp32 = float(answer["fp32_flops_per_s"])
    tensor = answer.get("tensor_flops_per_s")
    tensor = float(tensor) if tensor else None
    notes = [str(answer.get("method", ""))]
    cache_bytes = cache_bytes or int(answer.get("cache_bytes") or 0)
    if published is not None:
        if bandwidth > IMPLAUSIBLE_OVER_PUBLISHED * published.bandwidth_bytes_per_s:
            notes.append(f"bandwidth {bandwidth:.3g} above the datasheet: published used")
            bandwidth = published.bandwidth_bytes_per_s
        if fp32 > IMPLAUSIBLE_OVER_PUBLISHED * published.fp32_flops_per_s:
            notes.append(f"fp32 {fp32:.3g} above the datasheet: published used")
            fp32 = published.fp32_flops_per_s
        if tensor and published.tensor_flops_per_s and tensor > IMPLAUSIBLE_OVER_PUBLISHED * (
            published.tensor_flops_per_s
        ):
            notes.append(f"tensor {tensor:.3g} above the datasheet: published used")
            tensor = published.tensor_flops_per_s
        cache_bytes = cache_bytes or published.cache_bytes
    if bandwidth <= 0 or fp32 <= 0:
        raise ValueError(f"calibration measured no throughput: {answer}")
    return Peaks(
        device_name=device_name,
        kind=kind,
        bandwidth_bytes_per_s=bandwidth,
        fp32_flops_per_s=fp32,
        tensor_flops_per_s=tensor,
        cache_bytes=cache_bytes,
        published_bandwidth_bytes_per_s=published.bandwidth_bytes_per_s if published else None,
        source="measured",
        obtained_at=now(),
        method="; ".join(n for n in notes if n),
        threads=answer.get("threads"),
    )


class PeaksCache(_Files):
    """One file per (device name, torch version) under ``root``."""

    def path(self, device_name: str, torch_version: str) -> Path:
        return self.root / f"peaks-{_slug(device_name, torch_version)}.json"

    def load(self, device_name: str, torch_version: str) -> Peaks | None:
        data = self.read(self.path(device_name, torch_version))
        if not isinstance(data, dict):
            return None
        try:
            return Peaks.model_validate(data)
        except ValidationError:
            return None

    def store(self, peaks: Peaks, torch_version: str) -> None:
        self.write(self.path(peaks.device_name, torch_version), peaks.model_dump(mode="json"))

    async def get(
        self,
        device_name: str,
        kind: str,
        torch_version: str,
        measure: Callable[[], Awaitable[dict[str, Any]]],
        cache_bytes: int = 0,
    ) -> Peaks | None:
        """Cached peaks; else measured once (and kept); else the datasheet's (not kept, so the next
        evaluator measures again); None for a device neither measured nor published."""
        cached = self.load(device_name, torch_version)
        if cached is not None:
            return cached
        try:
            peaks = peaks_from_measurement(await measure(), device_name, kind, cache_bytes)
        except Exception as exc:  # noqa: BLE001 - any failure to measure falls back to the datasheet
            log.warning("calibrating %s failed (%s); using published peaks", device_name, exc)
            published = published_peaks(device_name) if kind == "cuda" else None
            if published is None:
                return None
            method = f"{published.method}; measurement failed: {exc}"[:300]
            return published.model_copy(update={"obtained_at": now(), "method": method})
        self.store(peaks, torch_version)
        return peaks


class CountsCache(_Files):
    """The reference's per-shape counts, one file per problem hash."""

    def path(self, problem_hash: str, stack: str = "") -> Path:
        return self.root / f"counts-{_slug(problem_hash, COUNTS_VERSION, stack)}.json"

    def load(self, problem_hash: str, stack: str = "") -> list[dict[str, Any]] | None:
        data = self.read(self.path(problem_hash, stack))
        if isinstance(data, dict) and data.get("problem_hash") == problem_hash:
            shapes = data.get("shapes")
            if isinstance(shapes, list) and all(isinstance(s, dict) for s in shapes):
                return shapes
        return None

    def store(self, problem_hash: str, shapes: list[dict[str, Any]], stack: str = "") -> None:
        self.write(self.path(problem_hash, stack), {"problem_hash": problem_hash, "shapes": shapes})
