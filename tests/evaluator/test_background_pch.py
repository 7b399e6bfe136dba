"""On a machine whose builds have cores of their own (a GPU machine's builders), the shared
precompiled header is made in the background on idle time of those cores: no build waits for it,
and closing the evaluator stops it, compilers included, leaving nothing half made to be trusted.
(Without such cores, a CPU machine, builds wait for it: every other test of a C++ build.)"""

import asyncio
import os
import time
from pathlib import Path

import pytest

from stark_mcp.evaluator.buildkit import ExtensionRequest, Toolchain
from stark_mcp.evaluator.host.build_toolchain import COMPILE_MAIN
from stark_mcp.evaluator.host.extension_builds import ExtensionCache
from stark_mcp.evaluator.host.integrity import Integrity
from stark_mcp.evaluator.sandbox import forked
from stark_mcp.evaluator.sandbox.env import scrub_env

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

REQUEST = ExtensionRequest(
    name="stark_bg_pch",
    cpp_sources=("torch::Tensor twice(torch::Tensor x) { return x * 2; }",),
    functions=(("twice", "twice"),),
)


def _descendants(root: int) -> list[int]:
    """``root`` and every live process below it (``/proc``'s parent links)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _alive(int(entry)):
            try:
                parents[int(entry)] = int(_stat(int(entry))[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _stat(pid: int) -> list[str]:
    """``/proc/PID/stat`` after the command name: state, parent, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _state(pid: int) -> str:
    try:
        return _stat(pid)[0]
    except (OSError, IndexError):
        return "X"


def _alive(pid: int) -> bool:
    return _state(pid) not in ("Z", "X")  # a killed process nobody reaped yet is not running


def _maker(toolchain_dir: Path, zygote: int | None) -> int | None:
    """The live primer for ``toolchain_dir``: a process running compile_main.py, or, forked from the
    zygote, one of the zygote's children named after the module it runs."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            name = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue
        if not _alive(int(entry)):
            continue
        if zygote is None and COMPILE_MAIN.encode() in argv and str(toolchain_dir).encode() in argv:
            return int(entry)
        if zygote is not None and name == "stark-compile_m" and int(_stat(int(entry))[1]) == zygote:
            return int(entry)
    return None


def _policy(pid: int) -> tuple[int, set[int]] | None:
    """(scheduling policy, allowed cores) of a live process, or None once it has ended."""
    try:
        return os.sched_getscheduler(pid), os.sched_getaffinity(pid)
    except (ProcessLookupError, PermissionError):
        return None


@pytest.mark.parametrize("fork", [False, True], ids=["process", "forked"])
async def test_a_first_build_does_not_wait_and_closing_stops_the_maker(tmp_path, fork) -> None:
    toolchain_dir = tmp_path / "toolchain"
    cache = ExtensionCache(tmp_path / "extensions", toolchain_dir, Integrity(tmp_path), fork=fork)
    zygote = forked.process_zygote(scrub_env(os.environ, {})) if fork else None
    toolchain = await asyncio.to_thread(Toolchain.detect)
    builders = sorted(os.sched_getaffinity(0))[-1:]  # the builders' cores
    start = time.monotonic()
    notes = await cache.prime(REQUEST, dict(os.environ), toolchain, 60.0, builders)
    assert time.monotonic() - start < 5.0, "the build waited for its precompiled header"
    assert notes == ["precompiled header: being made in the background for later builds"]
    assert cache.pending == 1
    # a second build with the same flags starts no second maker
    assert await cache.prime(REQUEST, dict(os.environ), toolchain, 60.0, builders) == []
    assert cache.pending == 1

    # Idle time of the builders' cores, inherited by its compilers. A compiler can end between being
    # listed and being read (the maker runs short preprocessor passes too): read again until one is
    # read alive.
    deadline, compilers, seen = time.monotonic() + 60.0, [], {}
    maker = None
    while time.monotonic() < deadline and not (maker and not _alive(maker)):
        maker = maker or _maker(toolchain_dir, zygote.proc.pid if zygote and zygote.proc else None)
        compilers = _descendants(maker)[1:] if maker else []
        for pid in ([maker] if maker else []) + compilers:
            if (policy := _policy(pid)) is not None:
                seen[pid] = policy
        if maker in seen and set(seen) & set(compilers):
            break
        await asyncio.sleep(0.05)
    assert maker in seen and set(seen) - {maker}, f"no compiler seen under the maker: {cache._background}"
    for pid, (scheduler, cores) in seen.items():
        assert (scheduler, cores) == (os.SCHED_IDLE, set(builders)), pid

    await cache.close()
    assert cache.pending == 0
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and any(_alive(p) for p in [maker, *compilers]):
        await asyncio.sleep(0.05)
    assert not any(_alive(p) for p in [maker, *compilers]), "the maker or its compilers outlived close()"
    assert not list(toolchain_dir.glob("primed/*")) and not list(toolchain_dir.rglob("*.gch"))
