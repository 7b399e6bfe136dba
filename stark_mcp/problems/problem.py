"""The ``Problem`` record (a reference module to beat) and the content hash that keys caches."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field, model_validator

from stark_mcp.problems.declarations import declarations_of, shape_label


def source_hash(text: str) -> str:
    """Content hash used as a cache key for problems and candidates alike."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Problem(BaseModel):
    """A reference module to beat: ``Model``, ``get_inputs()``, ``get_init_inputs()``.

    ``shapes``, ``import_roots`` and ``target`` are read from the source's optional top-level
    ``SHAPES``, ``STARK_IMPORT_ROOTS`` and ``STARK_TARGET`` (see ``problems.declarations``) every
    time a Problem is built, so they can never disagree with the text; the identity (``hash``)
    is the source text alone. Building one from a source with a malformed declaration raises
    ``ProblemError``.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    origin: str = ""
    level: int | None = None
    problem_id: int | None = None
    shapes: tuple[dict[str, Any], ...] = ()
    import_roots: tuple[str, ...] = ()
    target: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _read_declarations(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("source"), str):
            declared = declarations_of(data["source"], str(data.get("name") or "problem"))
            data = {**data, **declared.model_dump()}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hash(self) -> str:
        return source_hash(self.source)

    @property
    def shape_labels(self) -> list[str]:
        """One label per input set, ``["default"]`` when the problem declares no SHAPES."""
        return [shape_label(s) for s in self.shapes] or [shape_label({})]

    def __hash__(self) -> int:  # shapes hold dicts; the source determines everything else
        return hash((self.name, self.source, self.origin, self.level, self.problem_id))
