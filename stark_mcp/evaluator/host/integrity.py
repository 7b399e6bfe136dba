"""Signatures on what the parent writes to its caches, so an entry nobody else could have written is
recognizable: an HMAC-SHA256 under a key only the parent's user can read (``<cache>/.integrity-key``).

Candidates cannot reach the cache directory at the ``sandbox`` and ``uid`` levels; the signature is
the second wall (a file swapped in by any other means fails verification). At the ``process`` level
a candidate runs as this user and could read the key, so the caches are never reused there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from stark_mcp.evaluator.host.atomic_files import write_json_atomic


class Integrity:
    def __init__(self, cache_dir: Path) -> None:
        self.path = cache_dir / ".integrity-key"
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        if self._key is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                self._key = bytes.fromhex(self.path.read_text().strip())
            else:
                key = secrets.token_bytes(32)
                with os.fdopen(fd, "w") as fh:
                    fh.write(key.hex())
                self._key = key
        return self._key

    def sign(self, data: Any) -> str:
        return hmac.new(self.key, canonical(data), hashlib.sha256).hexdigest()

    def verify(self, data: Any, signature: object) -> bool:
        return isinstance(signature, str) and hmac.compare_digest(self.sign(data), signature)


def canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every regular file under ``root`` (relative paths); links and specials are refused."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "symlink:" + os.readlink(path)
        elif path.is_file():
            h = hashlib.sha256()
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[rel] = h.hexdigest()
    return out


MANIFEST = ".manifest.json"


# free-form: a folder manifest's JSON; its owner (extension_builds.SealedBuild) types what it reads
def seal_directory(directory: Path, integrity: Integrity, data: dict[str, Any]) -> None:
    """Sign ``data`` plus a digest of every file under ``directory`` into its manifest (free-form:
    each cache seals its own record, and reads it back through ``verified_directory``)."""
    files = tree_digest(directory)
    files.pop(MANIFEST, None)
    data = {**data, "files": files}
    write_json_atomic(directory / MANIFEST, {"data": data, "sig": integrity.sign(data)})


def verified_directory(directory: Path, integrity: Integrity) -> dict[str, Any] | None:
    """The signed data of ``directory``'s manifest when it verifies and every file still matches
    (free-form: the record its cache sealed, which that cache reads back into its own type)."""
    try:
        wrapper = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    data = wrapper.get("data") if isinstance(wrapper, dict) else None
    if not isinstance(data, dict) or not integrity.verify(data, wrapper.get("sig")):
        return None
    files = tree_digest(directory)
    files.pop(MANIFEST, None)
    return data if files == data.get("files") else None
