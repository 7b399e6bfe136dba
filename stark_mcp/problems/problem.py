"""The ``Problem`` record (a reference module to beat) and the content hash that keys caches."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, computed_field


def source_hash(text: str) -> str:
    """Content hash used as a cache key for problems and candidates alike."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Problem(BaseModel):
    """A reference module to beat: ``Model``, ``get_inputs()``, ``get_init_inputs()``."""

    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    origin: str = ""
    level: int | None = None
    problem_id: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hash(self) -> str:
        return source_hash(self.source)
