"""What every part of the trusted worker (``trusted/worker.py``) shares: the state it keeps per
problem and per spare runner, and ``WorkerBase``, the attributes ``Worker.__init__`` sets that its
parts read. Standard library and torch only.
"""

from __future__ import annotations

import shutil
import time

from stark_mcp.evaluator.common import frames, wire
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.common.wire import GPU_SPIN_S, WorkerSettings
from stark_mcp.evaluator.sandbox.forked import ZygoteClient
from stark_mcp.evaluator.sandbox.levels import IsolationInfo
from stark_mcp.evaluator.trusted.driver import DeviceTools, Driver
from stark_mcp.evaluator.trusted.problem import LoadedProblem
from stark_mcp.evaluator.trusted.runners import RunnerHandle


def json_key(settings: WorkerSettings) -> str:
    """What a spare's jail depends on: the settings that shape its environment."""
    return f"{settings.cpu_threads}"


class Spare:
    def __init__(
        self,
        runner: RunnerHandle,
        folder: str,
        job: str,
        build: str,
        visible: list[str],
        settings_key: str,
        out: str | None = None,
    ) -> None:
        self.runner, self.folder, self.job, self.build = runner, folder, job, build
        self.visible, self.settings_key = visible, settings_key
        self.out = out  # a writable folder for an outside tool's report (profiler, sanitizer)
        self.moved_to: list[int] | None = None  # started off its cores: where it goes once taken

    def discard(self) -> None:
        self.runner.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class ProblemState:
    def __init__(self, problem: LoadedProblem, job_dir: str, reference_dir: str) -> None:
        self.problem, self.job_dir = problem, job_dir
        self.reference_dir = reference_dir  # the reference jail's own folder (its problem.py, its out/)
        self.baseline: Driver | None = None
        # the eager runner started during the load, and the settings its jail was made for
        self.early_baseline: tuple[RunnerHandle, str] | None = None
        self.used = time.monotonic()


def _spin(cuda: bool) -> float:
    return GPU_SPIN_S if cuda else 0.0


def _drop_early(state: ProblemState) -> None:
    """Close the eager runner started during the load, if nobody took it."""
    if state.early_baseline is not None:
        state.early_baseline[0].close()
        state.early_baseline = None


class WorkerBase:
    """The worker's state, set by ``Worker.__init__``; its parts (``worker_device``,
    ``worker_problems``, ``worker_spares``, ``worker_baselines``) read it and call one another's
    methods through ``self``, which is always the whole ``Worker``."""

    out_fd: int
    device: str
    workdir: str
    outside: ToolPaths  # Nsight Compute and compute-sanitizer (trusted/profiling.py)
    cuda: bool
    info: IsolationInfo
    tools: DeviceTools
    arch_env: dict[str, str]
    problems: dict[str, ProblemState]
    gpu_index: int  # the host index (PCI order): which node and cores its jails get
    hidden: list[str]
    visible: list[str]
    spares: list[Spare]
    spares_wanted: WorkerSettings | None  # the settings of the next spares, once idle
    _zygote: ZygoteClient | None  # set only in a worker the zygote forked (SandboxPolicy.fork)

    def send(self, answer: wire.Answer) -> None:
        frames.send(self.out_fd, answer.to_frame())
