"""The seam between the callers (``RunService``, the server, ``bench``) and where evaluations run.

``Executor`` is what a caller may use; two implementations keep it:
- ``local``: ``Evaluator`` itself (``service.py``), one trusted worker per chosen GPU of this host,
  leased whole by ``slot_pool.py``, builds on a CPU pool of this host;
- ``ray``: ``RayExecutor`` (``ray_executor.py``), the same ``Evaluator`` inside one Ray actor per GPU
  of a cluster, builds as Ray CPU tasks, results back as validated records.
Callers choose one only where they are constructed (``open_executor``); nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from stark_mcp.device import Device
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, SandboxPolicy
from stark_mcp.problems import Problem
from stark_mcp.progress import Progress
from stark_mcp.records import Evaluation, ProfileReport, TimingStats

ExecutorKind = Literal["local", "ray"]


@runtime_checkable
class Executor(Protocol):
    """Checks problems, times baselines, evaluates candidates; an async context manager (docs/scale.md)."""

    settings: EvalSettings

    async def __aenter__(self) -> Executor: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def settle(self, waiting: Callable[[int], None] | None = None) -> None:
        """Wait for background work that later evaluations use (a precompiled header being made),
        first calling ``waiting(jobs)`` when there is some; ``__aexit__`` stops it instead."""
        ...

    async def prepare(self, device: Device | str = Device.AUTO) -> list[str]:
        """Make the shared files a first extension build would make (a precompiled header), now."""
        ...

    async def resolve_device(self, device: Device | str = Device.AUTO) -> Device: ...

    async def device_name(self, device: Device | str = Device.AUTO) -> str: ...

    async def slots(self, device: Device | str = Device.AUTO) -> int: ...

    async def isolation(self) -> IsolationInfo: ...

    async def check_problem(self, problem: Problem, device: Device | str = Device.AUTO) -> None: ...

    async def baselines(
        self,
        problem: Problem,
        device: Device | str = Device.AUTO,
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, TimingStats]: ...

    async def baseline_shapes(
        self,
        problem: Problem,
        device: Device | str = Device.AUTO,
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, dict[str, TimingStats]]: ...

    async def evaluate(
        self,
        problem: Problem,
        source: str | Candidate,
        device: Device | str = Device.AUTO,
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
        use_cache: bool = True,
        wait_for_baselines: bool = True,
    ) -> Evaluation: ...

    async def profile(
        self,
        problem: Problem,
        source: str | Candidate | None,
        device: Device | str = Device.AUTO,
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
    ) -> ProfileReport: ...


def open_executor(
    kind: ExecutorKind,
    cache_dir: Path,
    settings: EvalSettings,
    *,
    hidden: list[Path],
    policy: SandboxPolicy,
    tool_paths: ToolPaths | None = None,
    gpus: str | Sequence[int] | None = None,
    ray_address: str | None = None,
    toolchain_dir: Path | None = None,
) -> Executor:
    """The executor ``kind`` over ``cache_dir`` (not entered yet: use it as ``async with``)."""
    if kind == "ray":
        from stark_mcp.evaluator.host.ray_executor import RayExecutor

        return RayExecutor(
            cache_dir, settings, hidden=hidden, policy=policy, tool_paths=tool_paths, address=ray_address,
            toolchain_dir=toolchain_dir,
        )  # fmt: skip
    from stark_mcp.evaluator.host.service import Evaluator

    return Evaluator(
        cache_dir, settings, hidden=hidden, policy=policy, tool_paths=tool_paths, gpus=gpus,
        toolchain_dir=toolchain_dir,
    )  # fmt: skip
