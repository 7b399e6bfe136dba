"""One settings model for the whole package, read from ``STARK_*`` variables.

Data lives under ``STARK_HOME`` (default: ``$XDG_DATA_HOME/stark-mcp`` or
``~/.local/share/stark-mcp``): the SQLite database, the build cache and the
baseline cache. Tests point ``STARK_HOME`` at a temporary directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field


def _default_home() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "stark-mcp"


class Settings(BaseModel):
    home: Path = Field(default_factory=_default_home)
    db_path: Path | None = Field(None, description="SQLite file; default <home>/stark.db")
    cache_dir: Path | None = Field(None, description="build and baseline caches; default <home>/cache")
    device: str = "auto"
    log_level: str = "WARNING"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name in cls.model_fields:
            key = f"STARK_{name.upper()}"
            if key in env and env[key] != "":
                values[name] = env[key]
        if "db_path" not in values and env.get("STARK_DB"):
            values["db_path"] = env["STARK_DB"]
        return cls.model_validate(values)

    @property
    def database(self) -> Path:
        return self.db_path or self.home / "stark.db"

    @property
    def cache(self) -> Path:
        return self.cache_dir or self.home / "cache"
