from __future__ import annotations

import shutil
from pathlib import Path

import pytest

USER_PACKAGE = Path(__file__).resolve().parents[1] / "fixtures" / "userpkg"


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    """A fresh copy of the small user project (src/mylib) that a test may change."""
    project = tmp_path / "proj"
    shutil.copytree(USER_PACKAGE, project)
    return project


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
