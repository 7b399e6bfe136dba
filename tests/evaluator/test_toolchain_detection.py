"""The build toolchain is detected in a child process once per build environment in a process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stark_mcp.evaluator.host import build_toolchain, extension_builds
from stark_mcp.evaluator.host.integrity import Integrity
from stark_mcp.evaluator.sandbox.env import scrub_env


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_extension_caches_on_other_folders_share_this_processs_detection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build_toolchain, "_DETECTED", {})
    started: list[dict[str, str]] = []
    real = build_toolchain.run_detection

    async def counted(env: dict[str, str], fork: bool):
        started.append(env)
        return await real(env, fork)  # a real child that imports torch and asks the compilers

    monkeypatch.setattr(build_toolchain, "run_detection", counted)

    def cache(name: str) -> extension_builds.ExtensionCache:
        root = tmp_path / name
        return extension_builds.ExtensionCache(root / "extensions", root / "toolchain", Integrity(root))

    env = scrub_env({"PATH": "/usr/bin:/bin"}, {"CUDA_VISIBLE_DEVICES": ""})

    async def detect() -> None:
        first = await cache("a").toolchain(env)
        assert await cache("b").toolchain(env) == first
        assert first.torch and first.cxx_version
        assert len(started) == 1
        await cache("c").toolchain({**env, "CXX": "g++"})  # another environment: detected again
        assert len(started) == 2

    asyncio.run(detect())


def test_a_detection_forked_from_the_zygote_answers_as_a_fresh_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The zygote has torch imported already: its child detects in a fraction of the time a fresh
    interpreter takes, and must find the same toolchain (the build cache's keys hang on it)."""
    forked: list[int] = []
    real = build_toolchain.run_trusted_module

    async def counted(*args, **kwargs):
        done = await real(*args, **kwargs)
        forked.append(done is not None and done[0])
        return done

    monkeypatch.setattr(build_toolchain, "run_trusted_module", counted)
    env = scrub_env({"PATH": "/usr/bin:/bin"}, {"CUDA_VISIBLE_DEVICES": "", "CXX": "c++"})

    async def both() -> tuple[object, object]:
        detect = build_toolchain.run_detection
        return await detect(env, True), await detect(env, False)

    from_zygote, fresh = asyncio.run(both())
    assert forked == [0]  # the zygote started it, and it exited 0
    assert from_zygote == fresh and fresh.extra == {"CXX": "c++"}
