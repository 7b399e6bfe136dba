"""The build toolchain is detected in a child process once per build environment in a process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stark_mcp.evaluator import extensions
from stark_mcp.evaluator.integrity import Integrity
from stark_mcp.evaluator.sandbox.env import scrub_env


def test_extension_caches_on_other_folders_share_this_processs_detection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extensions, "_DETECTED", {})
    started: list[dict[str, str]] = []
    real = extensions._run_detection

    async def counted(env: dict[str, str]):
        started.append(env)
        return await real(env)  # a real child that imports torch and asks the compilers

    monkeypatch.setattr(extensions, "_run_detection", counted)

    def cache(name: str) -> extensions.ExtensionCache:
        root = tmp_path / name
        return extensions.ExtensionCache(root / "extensions", root / "toolchain", Integrity(root))

    env = scrub_env({"PATH": "/usr/bin:/bin"}, {"CUDA_VISIBLE_DEVICES": ""})

    async def detect() -> None:
        first = await cache("a").toolchain(env)
        assert await cache("b").toolchain(env) == first
        assert first.torch and first.cxx_version
        assert len(started) == 1
        await cache("c").toolchain({**env, "CXX": "g++"})  # another environment: detected again
        assert len(started) == 2

    asyncio.run(detect())
