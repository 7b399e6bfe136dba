"""``Evaluator``: the evaluation service behind every caller (CLI, MCP server, orchestrator).

It resolves the device, answers from the signed result cache, shares identical in-flight
evaluations, builds candidates in sandboxed builders on a CPU pool, and hands device work to a free
trusted worker of the device's pool (one warm process per chosen GPU, ``worker_handles.py``, leased whole
by ``slot_pool.py``), which runs the candidate in its own jail. See docs/evaluator.md and docs/scale.md.

``Evaluator`` owns the caches and the parent's parts, each a module of its own, and delegates:
``devices.py`` (devices, isolation, the workers and their commands), ``staging.py``
(builds and the candidate's file), ``baselines.py`` (problem checks, baselines),
``evaluation.py`` (``evaluate``, the SOL record), ``profile_runs.py`` (profiles and the
sanitizer after the verdict, profiles on demand).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from stark_mcp.config import default_toolchain_dir
from stark_mcp.device import Device
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.host.baselines import ParentBaselines
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.candidate_builds import BuildCache, builder_cpus
from stark_mcp.evaluator.host.device_probe import DeviceInfo, Prober
from stark_mcp.evaluator.host.devices import ParentDevices
from stark_mcp.evaluator.host.evaluation import ParentEvaluation
from stark_mcp.evaluator.host.extension_builds import ExtensionCache
from stark_mcp.evaluator.host.gpu_choice import parse_gpus
from stark_mcp.evaluator.host.integrity import Integrity
from stark_mcp.evaluator.host.prepare import warmup_requests
from stark_mcp.evaluator.host.profile_runs import ParentProfiles
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.host.slot_pool import SlotPool
from stark_mcp.evaluator.host.sol_floor import SolFloors
from stark_mcp.evaluator.host.staging import ParentStaging
from stark_mcp.evaluator.host.worker_handles import WorkerClient
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, SandboxPolicy
from stark_mcp.problems import Problem
from stark_mcp.progress import Progress
from stark_mcp.records import Evaluation, ProfileReport, TimingStats
from stark_mcp.sol.model import SolReport


class Evaluator:
    """Async context manager; see docs/evaluator.md for the contract."""

    def __init__(
        self,
        cache_dir: Path,
        settings: EvalSettings | None = None,
        build_workers: int | None = None,
        hidden: list[Path] | None = None,
        policy: SandboxPolicy | None = None,
        tool_paths: ToolPaths | None = None,
        gpus: str | Sequence[int] | None = None,
        cpu_workers: int = 1,
        toolchain_dir: Path | None = None,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        # Only trusted code writes it, so caches may share one: each then makes its headers once.
        self.toolchain_dir = Path(toolchain_dir) if toolchain_dir else default_toolchain_dir(self.cache_dir)
        self.gpus = parse_gpus(gpus)  # None: every visible GPU
        self.cpu_workers = max(1, cpu_workers)
        self.policy = policy or SandboxPolicy()
        self.tool_paths = tool_paths or ToolPaths()  # Nsight Compute and compute-sanitizer, for profiles
        self.settings = settings or EvalSettings()
        self.prober = Prober(self.cache_dir)
        self.integrity = Integrity(self.cache_dir)
        self.hidden = [str(p) for p in [self.cache_dir, self.toolchain_dir, *(hidden or [])]]
        self.extensions = ExtensionCache(
            self.cache_dir / "extensions", self.toolchain_dir, self.integrity, fork=self.policy.fork
        )
        self.builds = BuildCache(
            self.cache_dir / "builds",
            self.integrity,
            self.extensions,
            hidden=self.hidden,
            fork=self.policy.fork,
        )
        self.sol = SolFloors(self.cache_dir / "sol", self.integrity)  # floors and peaks: docs/sol.md
        self.devices = ParentDevices(
            self.prober, self.gpus, self.cpu_workers, self.hidden, self.policy, self.tool_paths
        )
        self.staging = ParentStaging(
            self.devices, self.builds, build_workers or max(1, (os.cpu_count() or 2) // 2)
        )
        self.baseline_timing = ParentBaselines(self.devices, self.cache_dir, self.integrity, self.settings)
        self.profiles = ParentProfiles(self.devices, self.staging, self.tool_paths, self.settings)
        self.evaluation = ParentEvaluation(
            self.devices, self.staging, self.baseline_timing, self.profiles, self.sol,
            self.cache_dir, self.integrity, self.settings,
        )  # fmt: skip

    async def __aenter__(self) -> Evaluator:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        tasks = self.evaluation.tasks() + list(self.devices.warming)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.devices.stop_workers()
        await self.builds.close()
        await self.extensions.close()
        self.devices.remove_files()

    async def settle(self, waiting: Callable[[int], None] | None = None) -> None:
        if waiting is not None and self.extensions.pending:
            waiting(self.extensions.pending)
        await self.extensions.settle()

    async def prepare(self, device: Device | str = Device.AUTO) -> list[str]:
        """Make now what a first extension build on this machine would make inside an agent's attempt
        (the shared precompiled header, include profiles: ``prepare.py``), and wait for it; notes
        say what was made (none: it was made before)."""
        info = await self.devices.device(device)
        env = scrub_env(os.environ, {k: v for k, v in self.builds.env(info, "").items() if v})
        toolchain = await self.extensions.toolchain(env)
        cpus = builder_cpus(info)
        notes: list[str] = []
        for label, request in warmup_requests(info.kind):
            made = await self.extensions.prime(request, env, toolchain, self.settings.build_timeout_s, cpus)
            notes += [f"{label}: {note}" for note in made]
        await self.extensions.settle()
        return notes

    # -- devices and isolation: ``devices.py`` ------------------------------------------------
    async def resolve_device(self, device: Device | str = Device.AUTO) -> Device:
        """``auto`` -> cuda or cpu. The first call may start the probe process: off the event loop."""
        return await self.devices.resolve_device(device)

    async def device_info(self, device: Device | str = Device.AUTO) -> DeviceInfo:
        """What evaluations on ``device`` run on (one model per process: mixed GPUs are refused)."""
        return await self.devices.device(device)

    async def device_name(self, device: Device | str = Device.AUTO) -> str:
        """The model evaluations on ``device`` are timed on (one per process: mixed GPUs are refused)."""
        return (await self.devices.device(device)).name

    async def slots(self, device: Device | str = Device.AUTO) -> int:
        """How many evaluations on ``device`` can run at once: the pool's live workers."""
        return len(self.devices.pool(await self.devices.device(device)).live)

    async def worker_pool(self, device: Device | str = Device.AUTO) -> SlotPool[WorkerClient]:
        """The device's pool of trusted workers (its ``history`` records every lease)."""
        return self.devices.pool(await self.devices.device(device))

    async def isolation(self) -> IsolationInfo:
        return await self.devices.isolation()

    def pool(self, info: DeviceInfo) -> SlotPool[WorkerClient]:
        return self.devices.pool(info)

    # -- problems and baselines: ``baselines.py`` ---------------------------------------------
    async def check_problem(self, problem: Problem, device: Device | str = Device.AUTO) -> None:
        """Import, build the reference, generate inputs for every shape, run it, check it fits."""
        await self.baseline_timing.check_problem(problem, device)

    async def baselines(
        self,
        problem: Problem,
        device: Device | str = Device.AUTO,
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, TimingStats]:
        return await self.baseline_timing.baselines(problem, device, which, progress)

    async def baseline_shapes(
        self,
        problem: Problem,
        device: Device | str = Device.AUTO,
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, dict[str, TimingStats]]:
        """Like ``baselines``, per declared shape (name -> shape label -> stats)."""
        return await self.baseline_timing.baseline_shapes(problem, device, which, progress)

    # -- evaluation and its SOL record: ``evaluation.py`` -------------------------------------
    async def evaluate(
        self,
        problem: Problem,
        source: str | Candidate,
        device: Device | str = Device.AUTO,
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
        use_cache: bool = True,
        wait_for_baselines: bool = True,
    ) -> Evaluation:
        """See ``ParentEvaluation.evaluate`` (``wait_for_baselines=False``: pending baselines)."""
        return await self.evaluation.evaluate(
            problem, source, device, settings, progress, use_cache, wait_for_baselines
        )

    async def sol_of(
        self, problem: Problem, evaluation: Evaluation, device: Device | str = Device.AUTO
    ) -> SolReport | None:
        """The SOL record of a time measured outside ``evaluate``, or None; never a verdict."""
        return await self.evaluation.sol_of(problem, evaluation, device)

    # -- profiles: ``profile_runs.py`` ------------------------------------------------------------
    async def profile(
        self,
        problem: Problem,
        source: str | Candidate | None,
        device: Device | str = Device.AUTO,
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
    ) -> ProfileReport:
        """A profile of ``source`` (None: the reference) on demand; see ``ParentProfiles.profile``."""
        return await self.profiles.profile(problem, source, device, settings, progress)
