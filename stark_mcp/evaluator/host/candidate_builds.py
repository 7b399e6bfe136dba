"""Per-candidate extension builds in a sandboxed, GPU-less builder; the cache is written by the parent.

At the ``sandbox`` level the builder compiles into a fresh directory mounted at ``/tmp/build`` (the
same path every runner of this source later sees, so ninja finds the objects up to date); once the
builder and everything it started are dead, the parent takes ownership of the directory, moves it to
``<root>/<source_hash>`` and signs a manifest of its files. A runner gets a private copy, never the
cache itself. At the weaker levels there is no mount namespace, so the build happens in place at
``<root>/<source_hash>`` (the path runners then use) and the same manifest is written.

A builder starts, imports torch, and then waits for the path of its candidate. On a GPU at the
``sandbox`` level the next builder is started while the current one works, so a candidate's build
does not wait for Python and torch to start (about 1.5 s of every re-evaluation on an H100).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stark_mcp.evaluator.buildkit import intercept
from stark_mcp.evaluator.buildkit.intercept import PREBUILT_INDEX
from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.host.build_outcomes import (
    BuildOutcome,
    bad_request,
    builder_verdict,
    read_log,
    tampered,
)
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.extension_builds import ExtensionCache
from stark_mcp.evaluator.host.extension_requests import BadRequest, ExtensionSummary, parse_request
from stark_mcp.evaluator.host.integrity import Integrity, seal_directory, verified_directory
from stark_mcp.evaluator.host.log_trimming import trim_compiler_log, trim_tail
from stark_mcp.evaluator.sandbox import jail_dirs
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.forked import INTERPRETER, ZygoteClient, zygote_first
from stark_mcp.evaluator.sandbox.host_layout import spare_cores
from stark_mcp.evaluator.sandbox.jail_dirs import JailPathError
from stark_mcp.evaluator.sandbox.jail_files import reclaim_tree
from stark_mcp.evaluator.sandbox.launch import (
    Jail,
    JailSpec,
    Mount,
    inside_path,
)
from stark_mcp.evaluator.sandbox.levels import IsolationInfo
from stark_mcp.records import Status

DEFERRED = ".deferred"  # imports touch CUDA: only the device's runner can build it
BUILDER_MODULE = "stark_mcp.evaluator.untrusted.builder"
LOG_LIMIT = 64 << 20
MAX_REQUESTS = 16  # load_inline calls one candidate may make


@dataclass(frozen=True)
class SealedBuild:
    """A build folder's signed manifest: ``state`` is ``built`` or ``deferred`` (to the device's
    runner); ``extensions`` the summaries of its extension builds, as they were sealed."""

    state: str
    extensions: list[ExtensionSummary]


@dataclass
class _Builder:
    """A started builder jail, waiting for its candidate: its job folder (the file and the log) and
    the build folder it writes (``/tmp/build`` inside)."""

    key: tuple[str, ...]
    jail: Jail
    sock: socket.socket
    job: Path
    work: Path

    @property
    def log_path(self) -> Path:
        return self.job / "build.log"

    def discard(self) -> None:
        self.sock.close()
        self.jail.close()
        shutil.rmtree(self.job, ignore_errors=True)
        reclaim_tree(self.work)
        shutil.rmtree(self.work, ignore_errors=True)


class BuildCache:
    def __init__(
        self,
        root: Path,
        integrity: Integrity,
        extensions: ExtensionCache,
        hidden: Sequence[str] = (),
        fork: bool = False,
    ) -> None:
        """``hidden``: what no builder or compile jail may see (the evaluator's list: the data
        directories and the toolchain; the cache, ``root``'s parent, always). ``fork``: builders
        are forked from this process's zygote (``sandbox/zygote.py``), which has imported torch
        already, where the jail runs as root at the ``sandbox`` level."""
        self.root, self.integrity, self.extensions = root, integrity, extensions
        self.hidden = list(dict.fromkeys([str(root.parent), *map(str, hidden)]))
        self.fork = fork
        self._spare: _Builder | None = None
        self._launching = False

    def directory(self, source_hash: str) -> Path:
        return self.root / source_hash

    def verified(self, source_hash: str) -> SealedBuild | None:
        """What the signed manifest says of the build, when it matches."""
        data = verified_directory(self.directory(source_hash), self.integrity)
        if data is None or data.get("source_hash") != source_hash:
            return None
        extensions = data.get("extensions")
        return SealedBuild(str(data.get("state")), extensions if isinstance(extensions, list) else [])

    def _seal(self, source_hash: str, state: str, extensions: list[ExtensionSummary]) -> None:
        seal_directory(
            self.directory(source_hash),
            self.integrity,
            {"source_hash": source_hash, "state": state, "extensions": extensions},
        )

    def env(self, info: DeviceInfo, inside: str) -> dict[str, str]:
        env = {"TORCH_EXTENSIONS_DIR": inside, "CUDA_VISIBLE_DEVICES": ""}
        if info.kind == "cuda" and info.capability:
            env["TORCH_CUDA_ARCH_LIST"] = info.capability
        return env

    async def build(
        self, source: str, source_hash: str, info: DeviceInfo, timeout: float, isolation: IsolationInfo
    ) -> BuildOutcome:
        sealed = self.verified(source_hash)
        if sealed is not None and sealed.state in ("built", "deferred"):
            return BuildOutcome(
                ok=True, deferred=sealed.state == "deferred", cached=True, extensions=sealed.extensions
            )
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.directory(source_hash)
        if final.exists():  # unsigned or tampered: never reused
            shutil.rmtree(final, ignore_errors=True)
        in_place = isolation.level != "sandbox"
        builder = None if in_place else self._take_spare(info, isolation)
        if builder is None:
            builder = await self._launch(info, isolation, final if in_place else None)
        if _warms_ahead(info, isolation) and self._spare is None and not self._launching:
            self._launching = True  # concurrent builds start one spare between them, not one each
            try:
                self._spare = await self._launch(info, isolation, None)
            finally:
                self._launching = False
        (builder.job / "candidate.py").write_text(source, encoding="utf-8")
        start = time.monotonic()
        try:
            outcome = await self._run(builder, info, timeout, isolation)
        finally:
            outcome_log = read_log(builder.log_path)
            shutil.rmtree(builder.job, ignore_errors=True)
        work = builder.work
        outcome.seconds = time.monotonic() - start
        if outcome.logs.get("build") is None and outcome_log and not outcome.ok:
            outcome.logs["build"] = trim_compiler_log(outcome_log)
        if not outcome.ok:
            shutil.rmtree(work, ignore_errors=True)
            return outcome
        reclaim_tree(work)
        if not in_place:
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            os.replace(work, final)
        self._seal(source_hash, "deferred" if outcome.deferred else "built", outcome.extensions)
        return outcome

    async def close(self) -> None:
        """Stop the builder started ahead, if any."""
        spare, self._spare = self._spare, None
        if spare is not None:
            await asyncio.to_thread(spare.discard)

    def _take_spare(self, info: DeviceInfo, isolation: IsolationInfo) -> _Builder | None:
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        if spare.key == _builder_key(info, isolation) and spare.jail.poll() is None:
            return spare
        spare.discard()
        return None

    async def _launch(self, info: DeviceInfo, isolation: IsolationInfo, work: Path | None) -> _Builder:
        """Start a builder jail; it imports torch and waits for its candidate. ``work``: the build
        folder (in place, at the weaker levels), else a fresh one that the parent renames later.

        Forked from the zygote where it can (no second import of torch: 2-3 CPU-s a build on a small
        machine), else, or if the zygote cannot, started by bubblewrap with descriptors of its own."""
        return await zygote_first(
            lambda zygote: self._launch_with(info, isolation, work, zygote), "builder", self.fork
        )

    async def _launch_with(
        self, info: DeviceInfo, isolation: IsolationInfo, work: Path | None, zygote: ZygoteClient | None
    ) -> _Builder:
        job = Path(tempfile.mkdtemp(prefix="stark-build-job-"))
        os.chmod(job, 0o755)
        if work is None:
            work = self.root / f".tmp-{secrets.token_hex(6)}"
        work.mkdir(parents=True)
        build_mount = Mount(str(work), "/tmp/build", writable=True)
        job_mount = Mount(str(job), "/tmp/job")
        ours, theirs = socket.socketpair()
        env = scrub_env(os.environ, self.env(info, inside_path(isolation.level, build_mount)))
        spec = JailSpec(
            argv=[*INTERPRETER, "-m", BUILDER_MODULE, str(theirs.fileno())],
            env=env,
            name="build",
            mounts=[job_mount, build_mount],
            scratch_bytes=8 << 30,
            max_file_bytes=LOG_LIMIT * 8,
            hidden=self.hidden,
            cpus=builder_cpus(info),
        )
        log = os.open(job / "build.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            jail = await asyncio.to_thread(
                Jail.start,
                spec,
                isolation,
                pass_fds=(theirs.fileno(),),
                stdout=log,
                stderr=log,
                zygote=zygote,
            )
        except BaseException:
            ours.close()
            shutil.rmtree(job, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)  # a retry makes it again, empty
            raise
        finally:
            os.close(log)
            theirs.close()
        return _Builder(_builder_key(info, isolation), jail, ours, job, work)

    async def _run(
        self, builder: _Builder, info: DeviceInfo, timeout: float, isolation: IsolationInfo
    ) -> BuildOutcome:
        jail, ours, work, log_path = builder.jail, builder.sock, builder.work, builder.log_path
        build_inside = inside_path(isolation.level, Mount(str(work), "/tmp/build", writable=True))
        job_inside = inside_path(isolation.level, Mount(str(builder.job), "/tmp/job"))
        hidden = self.hidden
        cpus = builder_cpus(info)
        try:
            frames.send(ours.fileno(), {"kind": "candidate", "path": f"{job_inside}/candidate.py"})
        except OSError:
            pass  # a builder that died while it waited: its exit tells the verdict below
        compile_env = scrub_env(os.environ, {k: v for k, v in self.env(info, "").items() if v})
        self.extensions.toolchain(compile_env)  # detected while the builder imports the candidate
        deadline = time.monotonic() + timeout
        index: dict[str, str] = {}
        extensions: list[ExtensionSummary] = []
        failed_log = ""
        frame: dict[str, object] | None = None
        try:
            while True:
                remaining = deadline - time.monotonic()
                try:
                    if remaining <= 0:
                        raise frames.FrameTimeout()
                    frame = await asyncio.to_thread(frames.recv, ours.fileno(), remaining)
                except frames.FrameTimeout:
                    jail.kill_all()
                    return BuildOutcome(
                        False,
                        status=Status.TIMEOUT,
                        reason="build",
                        message=f"the build ran past its {timeout:g} s budget; the builder was killed",
                        logs={"build": trim_tail(read_log(log_path))},
                    )
                except frames.FrameError as exc:
                    return BuildOutcome(
                        False, status=Status.RUNTIME_ERROR, reason="channel", message=str(exc)
                    )
                except OSError:  # the builder died and reset its end of the socket: its exit tells why
                    frame = None
                if frame is None or frame.get("kind") != "build_request":
                    break
                if len(extensions) >= MAX_REQUESTS:
                    return bad_request(f"more than {MAX_REQUESTS} extensions in one candidate")
                try:
                    request = parse_request(frame)
                except BadRequest as exc:
                    return bad_request(str(exc))
                remaining = deadline - time.monotonic()
                try:
                    async with asyncio.timeout(max(0.01, remaining)):  # not wait_for: worker_handles._recv
                        built = await self.extensions.resolve(
                            request, compile_env, isolation, remaining, hidden, cpus
                        )
                except TimeoutError:
                    jail.kill_all()
                    return BuildOutcome(
                        False,
                        status=Status.TIMEOUT,
                        reason="build",
                        message=f"the build ran past its {timeout:g} s budget; the compile was killed",
                        logs={"build": trim_tail(read_log(log_path))},
                    )
                extensions.append(built.summary())
                if built.ok:
                    where = f"ext/{built.key}"
                    try:
                        await asyncio.to_thread(self.extensions.copy_into, built, work, where)
                    except JailPathError as exc:
                        jail.kill_all()
                        return tampered(str(exc))
                    index[intercept.request_identity(request)] = where
                    answer = {"kind": "built", "path": f"{build_inside}/{where}"}
                else:
                    failed_log = built.log
                    answer = {"kind": "build_failed", "log": built.log[-(256 << 10) :]}
                try:
                    frames.send(ours.fileno(), answer)
                except OSError:
                    break  # the builder is gone; its exit tells the rest
            code = await asyncio.to_thread(jail.wait, max(1.0, deadline - time.monotonic()))
            if code is None:
                jail.kill_all()
        finally:
            ours.close()
            await asyncio.to_thread(jail.close)
        outcome = builder_verdict(frame, code, info, log_path, failed_log)
        outcome.extensions = extensions
        if outcome.ok:
            try:
                jail_dirs.write_bytes(work, PREBUILT_INDEX, json.dumps(index, sort_keys=True).encode())
            except JailPathError as exc:
                return tampered(str(exc))
        return outcome



def _warms_ahead(info: DeviceInfo, isolation: IsolationInfo) -> bool:
    """A builder started ahead of its candidate: on a GPU machine whose builders keep off the cores
    that timed runners spin on (its start-up may overlap a timing loop, and must not preempt it), at
    the ``sandbox`` level (where the build folder's host path can be chosen later, by renaming)."""
    return info.kind == "cuda" and builder_cpus(info) is not None and isolation.level == "sandbox"


def _builder_key(info: DeviceInfo, isolation: IsolationInfo) -> tuple[str, ...]:
    """What a builder's jail depends on: a spare started for other values is not used."""
    return (info.kind, info.name, str(info.capability), isolation.level)


def builder_cpus(info: DeviceInfo) -> list[int] | None:
    """Off the cores a GPU worker and its runners spin on (see trusted/worker_device.py, ``jail_spec``)."""
    return (spare_cores() or None) if info.kind == "cuda" else None
