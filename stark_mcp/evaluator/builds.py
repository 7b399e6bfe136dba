"""Per-candidate extension builds in a CPU-only builder process, cached by source hash."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from stark_mcp.evaluator.logs import trim_compiler_log, trim_tail
from stark_mcp.evaluator.probe import DeviceInfo
from stark_mcp.evaluator.process import ChannelError, ChildProcess
from stark_mcp.records import Status

BUILT_MARKER = ".built"
DEFERRED_MARKER = ".deferred"  # imports touch CUDA: only the device process can build it


@dataclass
class BuildOutcome:
    """``ok``: built (or nothing to build); ``deferred``: the device process must build it."""

    ok: bool
    deferred: bool = False
    status: Status | None = None
    reason: str | None = None
    message: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False


class BuildCache:
    """``<root>/<source_hash>/`` is one candidate's TORCH_EXTENSIONS_DIR; nobody else writes there."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def directory(self, source_hash: str) -> Path:
        return self.root / source_hash

    def is_built(self, source_hash: str) -> bool:
        return (self.directory(source_hash) / BUILT_MARKER).exists()

    def clean_stale_locks(self, source_hash: str) -> list[Path]:
        """Builds of one hash are serialized by the caller, so any lock found now is a killed build's."""
        removed = []
        for lock in self.directory(source_hash).glob("*/lock"):
            lock.unlink(missing_ok=True)
            removed.append(lock)
        return removed

    def env(self, source_hash: str, info: DeviceInfo) -> dict[str, str]:
        env = {"TORCH_EXTENSIONS_DIR": str(self.directory(source_hash))}
        if info.kind == "cuda" and info.capability:
            env["TORCH_CUDA_ARCH_LIST"] = info.capability
        return env

    async def build(self, source: str, source_hash: str, info: DeviceInfo, timeout: float) -> BuildOutcome:
        directory = self.directory(source_hash)
        if self.is_built(source_hash):
            return BuildOutcome(ok=True, cached=True)
        if (directory / DEFERRED_MARKER).exists():
            return BuildOutcome(ok=True, deferred=True, cached=True)
        directory.mkdir(parents=True, exist_ok=True)
        self.clean_stale_locks(source_hash)
        env = self.env(source_hash, info) | {"CUDA_VISIBLE_DEVICES": ""}
        start = time.monotonic()
        async with ChildProcess("build", {"candidate_source": source}, env, label="builder") as child:
            outcome = await self._await_result(child, timeout, info)
            outcome.seconds = time.monotonic() - start
        if outcome.status is Status.TIMEOUT:
            self.clean_stale_locks(source_hash)
        if outcome.ok:
            marker = DEFERRED_MARKER if outcome.deferred else BUILT_MARKER
            (directory / marker).write_text(f"{outcome.seconds:.1f}\n")
        return outcome

    async def _await_result(self, child: ChildProcess, timeout: float, info: DeviceInfo) -> BuildOutcome:
        try:
            record = await child.next_record(timeout)
        except asyncio.TimeoutError:
            child.kill()
            return BuildOutcome(False, status=Status.TIMEOUT, reason="build",
                                message=f"the build ran past its {timeout:g} s budget; the builder was killed",
                                logs={"build": trim_tail(child.log())})
        except ChannelError as exc:
            return BuildOutcome(False, status=Status.RUNTIME_ERROR, reason="channel", message=str(exc))
        if record is None:
            code, sig = await child.exit_status()
            how = f"was killed by {sig}" if sig else f"exited with code {code}"
            return BuildOutcome(False, status=Status.RUNTIME_ERROR, reason="signal" if sig else "no_result",
                                message=f"the builder importing the candidate {how} without a result",
                                logs={"build": trim_tail(child.log())})
        if record.get("kind") == "ok":
            return BuildOutcome(True)
        if record.get("cuda_unavailable") and info.kind == "cuda":
            # The module touches CUDA at import: let the device process import (and build) it.
            return BuildOutcome(True, deferred=True)
        status = record.get("status")
        if status == "build_error":
            log = trim_compiler_log(str(record.get("message", "")))
            return BuildOutcome(False, status=Status.BUILD_ERROR, reason="compile",
                                message=_first_line(log), logs={"build": log})
        reason = str(record.get("reason") or "import")
        return BuildOutcome(False, status=Status.LOAD_ERROR, reason=reason if reason == "syntax" else "import",
                            message=str(record.get("message", ""))[:2000],
                            logs={"traceback": trim_tail(str(record.get("traceback", ""))),
                                  "build": trim_tail(child.log())})


def _first_line(log: str) -> str:
    for line in log.splitlines():
        lowered = line.lower()
        if "error" in lowered and "error building extension" not in lowered:
            return "build failed: " + line.strip()[:500]
    return "build failed: " + (log.splitlines()[0][:500] if log else "no compiler output")
