"""The parent's staging of a candidate for a worker, for ``Evaluator`` (``service.py``).

A candidate that needs a build is built in a sandboxed builder (``candidate_builds.py``) on the CPU pool,
one build per source at a time; then its file is written where the worker's job frame names it.
Evaluations and on-demand profiles stage the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.host.candidate_builds import BuildCache
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.devices import ParentDevices
from stark_mcp.evaluator.host.extension_requests import ExtensionSummary
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.records import Evaluation, TrustReport


@dataclass
class Staged:
    """A candidate ready for a worker: its job, or the build's verdict when it failed."""

    job: wire.Job | None = None
    deferred: bool = False
    logs: dict[str, str] = field(default_factory=dict)
    failure: Evaluation | None = None
    extensions: list[ExtensionSummary] = field(default_factory=list)


class ParentStaging:
    """Builds candidates (a bounded number at once) and writes their files for the workers."""

    def __init__(self, devices: ParentDevices, builds: BuildCache, build_workers: int) -> None:
        self.devices = devices
        self.builds = builds
        self._build_slots = asyncio.Semaphore(build_workers)
        self._build_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def stage(
        self,
        source: str,
        digest: str,
        info: DeviceInfo,
        s: EvalSettings,
        needs_build: bool,
        note: Callable[[str], Awaitable[None]],
        phase_seconds: dict[str, float],
    ) -> Staged:
        """Build the candidate if it needs it and write its file: what a worker's job names."""
        started = time.monotonic()
        isolation = await self.devices.isolation()
        staged = Staged()
        build_dir: str | None = None
        if needs_build:
            await note("build")
            t0 = time.monotonic()
            async with self._build_slots, self._build_locks[digest]:
                t1 = time.monotonic()
                outcome = await self.builds.build(source, digest, info, s.build_timeout_s, isolation)
            phase_seconds["queue"] = round(t1 - t0, 3)
            phase_seconds["build"] = round(time.monotonic() - t1, 3)
            staged.extensions = outcome.extensions
            if not outcome.ok:
                assert outcome.status is not None
                staged.failure = Evaluation(
                    status=outcome.status,
                    reason=outcome.reason,
                    message=outcome.message,
                    logs=outcome.logs,
                    phase_seconds=phase_seconds,
                    extensions=outcome.extensions,
                    # A verdict reached at build time still says what walled the candidate off.
                    trust=TrustReport(
                        isolation=isolation.level,
                        isolation_note=isolation.note,
                        defences=[f"candidate's import and builds in their own jails ({isolation.level})"],
                    ),
                )
                return staged
            staged.deferred, staged.logs = outcome.deferred, outcome.logs
            build_dir = str(self.builds.directory(digest))
        source_path = self.devices.tmp / f"candidate-{digest}.py"
        source_path.write_text(source, encoding="utf-8")
        staged.job = wire.Job(
            source_path=str(source_path),
            build_dir=build_dir,
            deferred=staged.deferred,
            build_in_place=isolation.level != "sandbox",
        )
        # Measured, not left to ``other``: each file call gives up the interpreter, and in a server
        # whose threads are busy, getting it back took 50 ms a call (tests/evaluator/test_phases.py).
        built = phase_seconds.get("queue", 0.0) + phase_seconds.get("build", 0.0)
        phase_seconds["stage"] = round(max(0.0, time.monotonic() - started - built), 3)
        return staged
