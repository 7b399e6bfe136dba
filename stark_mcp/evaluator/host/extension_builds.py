"""Extension builds requested by a candidate's ``load_inline`` calls: validated, keyed, cached, jailed.

The builder (a jail running the candidate's import) sends each ``load_inline`` call as a request
(``buildkit.ExtensionRequest`` as JSON). Here, in the parent:

- the request is validated (types, a name that is an identifier, bounded sizes:
  ``extension_requests.py``); anything else ends the build with ``build_error/request``;
- its ``request_key`` (normalized sources, every argument, the toolchain) names a directory of
  ``<cache>/extensions``, signed like every cache entry; a match is a hit, a mismatch is rebuilt;
- on a miss, ``compile_main`` builds it in a **compile jail** (the sources are the candidate's, so
  compiling is untrusted work): the request read-only, a fresh output directory its only writable
  path, and the shared toolchain directory (precompiled headers, include profiles) read-only;
- that toolchain directory is filled only here, by ``compile_main --prime`` run as trusted code for
  requests whose flags are all on the plain list (``buildkit.flags_are_plain``): it compiles
  torch's own headers with those flags, never the candidate's sources. Include profiles (seconds)
  are made while the first build that needs them compiles (its light variants are kept only if
  the profiles then allow them); a precompiled header (35-50 s, worth it from
  the fourth build) is made in the background on idle CPU time of the builders' own cores (a GPU
  machine's), so no build waits for it: builds before it is ready compile without it. Where builds
  have no cores of their own (a CPU machine, whose timing loops use every core), the build waits.
Only the library, the report and the log leave a compile jail, as regular files.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stark_mcp.evaluator.buildkit.request import (
    ExtensionRequest,
    Toolchain,
    flags_are_plain,
    is_cacheable,
    layout,
    request_key,
)
from stark_mcp.evaluator.host.build_toolchain import (
    COMPILE_MAIN,
    COMPILE_MODULE,
    detect_toolchain,
    prime_key,
    run_process,
)
from stark_mcp.evaluator.host.extension_requests import ExtensionBuild
from stark_mcp.evaluator.host.integrity import Integrity, seal_directory, verified_directory
from stark_mcp.evaluator.host.log_trimming import trim_compiler_log
from stark_mcp.evaluator.sandbox import jail_dirs
from stark_mcp.evaluator.sandbox.forked import INTERPRETER, ZygoteClient, run_trusted_module, zygote_first
from stark_mcp.evaluator.sandbox.jail_files import reclaim_tree
from stark_mcp.evaluator.sandbox.launch import Jail, JailSpec, Mount, inside_path
from stark_mcp.evaluator.sandbox.levels import IsolationInfo

PROFILE_WAIT_S = 120.0  # how long a compile jail waits for include profiles made beside it
PCH_TIMEOUT_S = 900.0  # a background precompiled header: bounded, though no build waits for it
KEEP = ("build_report.json", "build.log")  # besides the library, what leaves a compile jail
LIBRARY_SUFFIX = ".so"


class ExtensionCache:
    """``<root>/<request_key>/``: a library built in a compile jail, signed by the parent."""

    def __init__(
        self,
        root: Path,
        toolchain_dir: Path,
        integrity: Integrity,
        *,
        background_pch: bool = True,
        fork: bool = False,
    ) -> None:
        self.root, self.toolchain_dir, self.integrity = root, toolchain_dir, integrity
        # False: a build waits for its precompiled header (a one-shot process that would kill it)
        self.background_pch = background_pch
        # compile jails forked from this process's zygote (sandbox/zygote.py), as builders are
        self.fork = fork
        self._locks: dict[str, asyncio.Lock] = {}
        self._toolchains: dict[str, asyncio.Task[Toolchain]] = {}
        self._background: dict[str, asyncio.Task[list[str]]] = {}  # prime key -> its header's making
        self.compiles = 0  # compile jails started (tests and benchmarks read it)

    @property
    def pending(self) -> int:
        """Precompiled headers being made in the background."""
        return sum(not task.done() for task in self._background.values())

    async def settle(self) -> None:
        """Wait for the precompiled headers being made in the background."""
        await asyncio.gather(*self._background.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop background work (its compilers too); what it finished stays in the toolchain directory."""
        tasks = [task for task in self._background.values() if not task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def directory(self, key: str) -> Path:
        return self.root / key

    def verified(self, key: str, name: str) -> bool:
        data = verified_directory(self.directory(key), self.integrity)
        return data is not None and data.get("key") == key and f"{name}{LIBRARY_SUFFIX}" in data["files"]

    # -- the toolchain, detected once per build environment, off the event loop ---------------------
    def toolchain(self, env: dict[str, str]) -> asyncio.Task[Toolchain]:
        tag = json.dumps(env, sort_keys=True)
        if tag not in self._toolchains:
            self._toolchains[tag] = asyncio.ensure_future(detect_toolchain(env, self.fork))
        return self._toolchains[tag]

    async def resolve(
        self,
        request: ExtensionRequest,
        env: dict[str, str],
        isolation: IsolationInfo,
        timeout: float,
        hidden: list[str],
        cpus: list[int] | None,
    ) -> ExtensionBuild:
        start = time.monotonic()
        toolchain = await self.toolchain(env)
        key = await asyncio.to_thread(request_key, request, toolchain)
        cacheable = isolation.level != "process" and await asyncio.to_thread(is_cacheable, request)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            shape = layout(request)
            if cacheable and await asyncio.to_thread(self.verified, key, request.name):
                report = _read_json(self.directory(key) / KEEP[0])
                return ExtensionBuild(
                    True,
                    key,
                    request.name,
                    shape,
                    self.directory(key),
                    cached=True,
                    seconds=time.monotonic() - start,
                    report=report,
                )
            profiles = self._start_profiles(request, env, toolchain, timeout, cpus)
            try:
                primed = await self.prime(request, env, toolchain, timeout, cpus, light=profiles is None)
                build = await self._compile(
                    request, key, env, isolation, timeout, hidden, cpus, cacheable,
                    await_profiles=PROFILE_WAIT_S if profiles is not None else 0.0,
                )  # fmt: skip
            except BaseException:
                if profiles is not None:
                    profiles.cancel()
                    await asyncio.gather(profiles, return_exceptions=True)
                raise
            if profiles is not None:
                primed = await profiles + primed
        build.layout, build.primed = shape, primed
        build.seconds = time.monotonic() - start
        return build

    # -- trusted: the shared toolchain directory ------------------------------------------------------
    def _start_profiles(
        self,
        request: ExtensionRequest,
        env: dict[str, str],
        toolchain: Toolchain,
        timeout: float,
        cpus: list[int] | None,
    ) -> asyncio.Future[list[str]] | None:
        """The include profiles of a CUDA request's first build with its flags, made while it compiles.

        Making them takes seconds, and the first build on a fresh machine waited for them: now its
        compile jail compiles the light variants meanwhile and keeps each only if its profile, once
        made, allows it (``compile_main --await-profiles``). None: nothing to make, or not allowed.
        """
        if not request.cuda_sources or not flags_are_plain(request):
            return None
        key = prime_key(request, toolchain)
        if self._marker(key, "light").exists():
            return None
        return asyncio.ensure_future(self._prime_part(request, env, key, "light", timeout, cpus, idle=False))

    async def prime(
        self,
        request: ExtensionRequest,
        env: dict[str, str],
        toolchain: Toolchain,
        timeout: float,
        cpus: list[int] | None,
        light: bool = True,
    ) -> list[str]:
        """Make what fast builds with ``request``'s flags read (before its compile); notes say what.
        ``light=False``: not the include profiles (``_start_profiles`` makes them beside the compile)."""
        if not flags_are_plain(request):
            return ["not primed: flags outside the plain list"]
        key = prime_key(request, toolchain)
        notes: list[str] = []
        if request.cuda_sources and light:  # the include profiles that let a .cu skip most of torch's headers
            notes += await self._prime_part(request, env, key, "light", timeout, cpus, idle=False)
        if not (self.background_pch and cpus):
            # Without cores of their own, builds share every core with CPU timing loops: a maker there,
            # even on idle time and stopped during each lease, left honest CPU figures flagged (3 of
            # 40 evaluations against 0 of 60, and once in CI), so there the build waits for it.
            return notes + await self._prime_part(request, env, key, "pch", timeout, cpus, idle=False)
        if key not in self._background and not self._marker(key, "pch").exists():
            self._background[key] = asyncio.create_task(
                self._prime_part(request, env, key, "pch", PCH_TIMEOUT_S, cpus, idle=True)
            )
            notes.append("precompiled header: being made in the background for later builds")
        return notes

    def _marker(self, key: str, part: str) -> Path:
        return self.toolchain_dir / "primed" / f"{key}.{part}"

    async def _prime_part(
        self,
        request: ExtensionRequest,
        env: dict[str, str],
        key: str,
        part: str,
        timeout: float,
        cpus: list[int] | None,
        idle: bool,
    ) -> list[str]:
        """``compile_main --prime PART`` as trusted code, once per key and part (``idle``: on idle
        CPU time only)."""
        marker = self._marker(key, part)
        # concurrent first builds with the same flags wait for one priming, not one each
        async with self._locks.setdefault(f"prime-{part}-{key}", asyncio.Lock()):
            if marker.exists():
                return []
            return await self._run_primer(request, env, marker, part, timeout, cpus, idle)

    async def _run_primer(
        self,
        request: ExtensionRequest,
        env: dict[str, str],
        marker: Path,
        part: str,
        timeout: float,
        cpus: list[int] | None,
        idle: bool,
    ) -> list[str]:
        work = Path(tempfile.mkdtemp(prefix="stark-prime-"))
        args = [str(work / "request.json"), str(work / "out"), "--pch-dir", str(self.toolchain_dir)]
        args += ["--prime", part]
        args += ["--idle"] if idle else []
        args += ["--cpus", ",".join(map(str, cpus))] if cpus else []
        try:
            (work / "request.json").write_text(request.to_json())
            # forked from the zygote (torch imported already), else a process; either way in a session
            # of its own: cancelling kills the compilers it started, not only itself
            done = await run_trusted_module(COMPILE_MODULE, args, env, timeout) if self.fork else None
            if done is None:
                done = await run_process([sys.executable, "-P", COMPILE_MAIN, *args], env, work, timeout)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        returncode, out, err = done
        if returncode != 0:
            return [f"priming failed: {err.decode(errors='replace')[-300:]}"]
        try:
            notes = [str(n)[:300] for n in json.loads(out.decode().strip().splitlines()[-1])["primed"]]
        except (ValueError, KeyError, IndexError):
            notes = []
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(notes))
        return notes

    # -- untrusted: the compile jail ------------------------------------------------------------------
    async def _compile(
        self,
        request: ExtensionRequest,
        key: str,
        env: dict[str, str],
        isolation: IsolationInfo,
        timeout: float,
        hidden: list[str],
        cpus: list[int] | None,
        cacheable: bool,
        await_profiles: float = 0.0,
    ) -> ExtensionBuild:
        self.root.mkdir(parents=True, exist_ok=True)
        self.toolchain_dir.mkdir(parents=True, exist_ok=True)
        job = Path(tempfile.mkdtemp(prefix="stark-compile-job-"))
        out = self.root / f".tmp-{key}-{secrets.token_hex(4)}"
        out.mkdir()
        (job / "request.json").write_text(request.to_json())
        os.chmod(job, 0o755)
        os.chmod(job / "request.json", 0o644)
        mounts = [
            Mount(str(job), "/tmp/request"),
            Mount(str(out), "/tmp/out", writable=True),
            Mount(str(self.toolchain_dir), "/tmp/toolchain"),
        ]
        req_in, out_in, tool_in = (inside_path(isolation.level, m) for m in mounts)
        spec = JailSpec(
            argv=[
                *INTERPRETER, "-m", COMPILE_MODULE, f"{req_in}/request.json", out_in,
                "--pch-dir", tool_in, "--pch-readonly",
                *(["--await-profiles", f"{await_profiles:.0f}"] if await_profiles else []),
            ],
            env=env,
            name="compile",
            mounts=mounts,
            scratch_bytes=8 << 30,
            max_file_bytes=4 << 30,
            hidden=hidden,
            cpus=cpus,
        )  # fmt: skip
        self.compiles += 1
        log_path = job / "jail.log"
        jail = await self._start_compile_jail(spec, isolation, log_path, out)
        try:
            code = await asyncio.to_thread(jail.wait, timeout)
            if code is None:
                jail.kill_all()
        finally:
            await asyncio.to_thread(jail.close)
        try:
            reclaim_tree(out)
            library = out / f"{request.name}{LIBRARY_SUFFIX}"
            ok = code == 0 and library.is_file() and not library.is_symlink()
            report = _read_json(out / KEEP[0])
            if not ok:
                log = _read_text(out / KEEP[1]) or _read_text(log_path)
                if code is None:
                    log = f"the compile ran past its {timeout:g} s budget and was killed\n" + log
                return ExtensionBuild(False, key, request.name, "", log=trim_compiler_log(log), report=report)
            for entry in list(out.iterdir()):  # only regular files we expect leave the jail
                if entry.name not in (library.name, *KEEP) or entry.is_symlink() or not entry.is_file():
                    shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
            if not cacheable:
                final = self.root / f".uncached-{key}-{secrets.token_hex(4)}"
                os.replace(out, final)
                return ExtensionBuild(True, key, request.name, "", final, report=report)
            final = self.directory(key)
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)  # unsigned or tampered: never reused
            try:
                os.replace(out, final)
            except OSError:  # another evaluator on this cache sealed the same key meanwhile
                if not self.verified(key, request.name):
                    raise
            else:
                seal_directory(final, self.integrity, {"key": key, "name": request.name})
            return ExtensionBuild(True, key, request.name, "", final, report=report)
        finally:
            shutil.rmtree(job, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)

    async def _start_compile_jail(
        self, spec: JailSpec, isolation: IsolationInfo, log_path: Path, out: Path
    ) -> Jail:
        """Forked from the zygote where it can (the compile's Python, which renders torch's build
        file, then needs no import of torch of its own), else, or if the zygote cannot, started by
        bubblewrap on a fresh log and an emptied output folder."""

        async def start(zygote: ZygoteClient | None) -> Jail:
            if any(out.iterdir()):  # what a half-built jail wrote
                reclaim_tree(out)
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
            return await _start_logged(spec, isolation, log_path, zygote)

        return await zygote_first(start, "compile", self.fork)

    def copy_into(self, build: ExtensionBuild, work: Path, where: str) -> None:
        """The library (read-only) into ``work/where`` of a candidate's build directory, following no
        link the builder planted there; the cache stays the parent's."""
        assert build.directory is not None
        name = f"{build.name}{LIBRARY_SUFFIX}"
        jail_dirs.copy_file(build.directory / name, work, f"{where}/{name}", mode=0o555)
        if build.directory.name.startswith(".uncached-"):
            shutil.rmtree(build.directory, ignore_errors=True)


async def _start_logged(
    spec: JailSpec, isolation: IsolationInfo, log_path: Path, zygote: ZygoteClient | None
) -> Jail:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        return await asyncio.to_thread(Jail.start, spec, isolation, stdout=fd, stderr=fd, zygote=zygote)
    finally:
        os.close(fd)


def _read_json(path: Path) -> dict[str, Any]:  # free-form: a report a compile jail wrote
    try:
        data = json.loads(_read_text(path, 4 << 20, whole=True))
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _read_text(path: Path, limit: int = 256 << 10, whole: bool = False) -> str:
    """The end of a file a jail wrote (all of it, or nothing, with ``whole``): a regular file only,
    never through a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (whole and info.st_size > limit):
            return ""
        if info.st_size > limit:
            fh.seek(info.st_size - limit)
        return fh.read(limit).decode("utf-8", "replace")
