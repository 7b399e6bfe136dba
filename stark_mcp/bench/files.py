"""The benchmark folder: ``bench.json`` (what it is), ``results.jsonl`` (one row per pair) and
``runs/RUN_ID.json.gz`` (each run's whole tree, for the report). Every write replaces its file
atomically, so a crash leaves the previous version, never half a file.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from stark_mcp.bench.errors import BenchError
from stark_mcp.bench.plan import BenchPlan
from stark_mcp.bench.rows import ResultRow

MANIFEST = "bench.json"
RESULTS = "results.jsonl"
RUNS = "runs"


class Manifest(BaseModel):
    """``bench.json``: the benchmark's id (its runs carry it in their config) and its identity."""

    bench_id: str
    created_at: float
    identity: dict[str, Any]
    pairs: list[str]
    command: dict[str, Any] = Field(default_factory=dict, description="the options it was started with")


def write_atomic(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    # A fresh name opened with "x" gets the user's umask, unlike mkstemp's private 0600.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with tmp.open("xb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def open_manifest(out: Path, plan: BenchPlan) -> Manifest:
    """The folder's manifest, created if new; ``BenchError`` if it holds a different benchmark."""
    path = out / MANIFEST
    identity = plan.identity()
    if path.exists():
        manifest = read_manifest(out)
        differ = [
            k
            for k in sorted(set(identity) | set(manifest.identity))
            if identity.get(k) != manifest.identity.get(k)
        ]
        if differ:
            raise BenchError(
                f"{out} holds another benchmark (it differs in: {', '.join(differ)}); rerun it with the "
                "options it was started with to resume it, or give a new --out"
            )
        return manifest
    manifest = Manifest(
        bench_id=f"b-{secrets.token_hex(4)}",
        created_at=time.time(),
        identity=identity,
        pairs=[p.id for p in plan.pairs],
        command=plan.spec.model_dump(mode="json", exclude={"out"}),
    )
    write_atomic(path, manifest.model_dump_json(indent=2) + "\n")
    return manifest


def read_manifest(out: Path) -> Manifest:
    path = out / MANIFEST
    try:
        return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchError(f"{out} is not a benchmark folder: it has no {MANIFEST}") from None
    except (OSError, ValidationError, ValueError) as exc:
        raise BenchError(f"cannot read {path}: {exc}") from None


def write_results(out: Path, rows: Iterable[ResultRow]) -> None:
    write_atomic(out / RESULTS, "".join(row.model_dump_json() + "\n" for row in rows))


def read_results(out: Path) -> list[ResultRow]:
    path = out / RESULTS
    if not path.exists():
        return []
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(ResultRow.model_validate_json(line))
        except ValidationError as exc:
            raise BenchError(f"{path}:{lineno}: not a result row: {exc.errors()[0]['msg']}") from None
    return rows


def run_document_path(out: Path, run_id: str) -> Path:
    return out / RUNS / f"{run_id}.json.gz"


def write_json_gz(path: Path, document: dict[str, Any]) -> None:
    # mtime=0 keeps the bytes a function of the content alone.
    write_atomic(path, gzip.compress(json.dumps(document).encode("utf-8"), mtime=0))


def read_json_gz(path: Path) -> dict[str, Any]:
    try:
        return json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError, EOFError) as exc:
        raise BenchError(f"cannot read {path}: {exc}") from None
