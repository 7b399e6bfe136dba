"""The build toolchain as the parent sees it, and the trusted children that ask it.

Which compilers and torch a build environment has is detected in a child (the parent never imports
torch), once per environment in a process: a zygote's fork where the evaluator has one, else a fresh
interpreter. ``prime_key`` names what a fast build with a request's flags looks for in the shared
toolchain directory; ``extension_builds.ExtensionCache`` fills it with ``compile_main --prime`` run
through ``run_process`` or ``run_trusted_module``, and runs ``compile_main`` in compile jails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import signal
import sys
from pathlib import Path

from stark_mcp.evaluator.buildkit.request import ExtensionRequest, Toolchain, layout
from stark_mcp.evaluator.sandbox.forked import run_trusted_module

COMPILE_MAIN = str(Path(__file__).resolve().parents[1] / "buildkit" / "compile_main.py")
COMPILE_MODULE = "stark_mcp.evaluator.buildkit.compile_main"  # what a compile jail runs

# What this process detected, by build environment: every evaluator in it (a test suite's, a benchmark's
# legs) builds with the same compilers and torch, so one child per environment answers for all.
_DETECTED: dict[str, Toolchain] = {}
DETECT_MODULE = "stark_mcp.evaluator.buildkit.detect_main"
DETECT_TIMEOUT_S = 180.0  # importing torch, where no zygote has it imported, on a loaded machine


async def detect_toolchain(env: dict[str, str], fork: bool = False) -> Toolchain:
    tag = json.dumps(env, sort_keys=True)
    if tag not in _DETECTED:
        _DETECTED[tag] = await run_detection(env, fork)
    return _DETECTED[tag]


async def run_detection(env: dict[str, str], fork: bool) -> Toolchain:
    """``Toolchain.detect()`` in a child with the builds' environment, the parent never imports torch:
    forked from this process's zygote where ``fork`` allows it, else a fresh interpreter."""
    done = await run_trusted_module(DETECT_MODULE, [], env, DETECT_TIMEOUT_S) if fork else None
    if done is None:
        code = (
            "import dataclasses, json, sys; sys.path.insert(0, sys.argv[1]); from buildkit.request import "
            "Toolchain; print(json.dumps(dataclasses.asdict(Toolchain.detect())))"
        )
        argv = [sys.executable, "-P", "-c", code, str(Path(COMPILE_MAIN).parents[1])]
        done = await run_process(argv, env, Path("/"), DETECT_TIMEOUT_S)
    returncode, out, err = done
    if returncode != 0:
        raise RuntimeError(f"detecting the build toolchain failed: {err.decode(errors='replace')[-1000:]}")
    return Toolchain(**json.loads(out.decode().strip().splitlines()[-1]))


async def run_process(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        async with asyncio.timeout(timeout):  # not wait_for: see worker_handles._recv
            out, err = await proc.communicate()
    except (TimeoutError, asyncio.CancelledError):
        kill_group(proc.pid)  # before the wait: the group's id is still ours
        await proc.wait()
        raise
    return proc.returncode or 0, out, err


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def prime_key(request: ExtensionRequest, toolchain: Toolchain) -> str:
    """What decides which shared files a fast build looks for: flags, toolchain, header layout."""
    blob = json.dumps(
        [
            dataclasses.asdict(toolchain),
            request.extra_cflags,
            request.extra_cuda_cflags,
            request.uses_cuda,
            request.is_python_module,
            request.no_implicit_headers,
            request.functions is not None,
            layout(request),
            [s.lstrip()[:200].split("\n", 1)[0] for s in request.cpp_sources[:1]],
            any("torch/extension.h" in s for s in request.cuda_sources),
        ],
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]
