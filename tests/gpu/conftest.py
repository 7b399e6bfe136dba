"""Fixtures for the GPU tests; each test module skips itself when CUDA is unavailable."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
