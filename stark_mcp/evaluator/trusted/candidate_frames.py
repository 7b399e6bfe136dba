"""A candidate runner's frames as the trusted side writes and reads them: the job the worker staged
for it, its setup frame and load budget, and what it reports of itself (its own profiler's kernels,
its JIT count), read as untrusted. Standard library and torch only.
"""

from __future__ import annotations

from typing import Any, TypedDict

from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.trusted.driver import Driver, Made
from stark_mcp.evaluator.trusted.problem import LoadedProblem


class StagedJob(TypedDict):
    """Where a started runner sees a candidate's files, as the worker staged them (``stage``)."""

    job: str  # the job directory as the runner sees it (candidate.py, init.pt)
    slots: int  # input slots the driver rotates through
    deferred: bool  # the build finishes in the runner: its budget is added to the load's
    env: dict[str, str]
    sys_path: list[str]


class RunnerProfiling(TypedDict):
    """Set when an outside tool (Nsight Compute) wraps the runner."""

    nvtx: str  # the NVTX range the runner's profiled calls run in


class RunnerTiming(TypedDict):
    sleep_cycles: int
    spin_s: float


class CandidateSetup(TypedDict):
    """The setup frame of a candidate's runner (``untrusted/runner.py`` reads it)."""

    mode: str  # candidate (or reference, for a profile of the problem's own model)
    device: str
    module_path: str
    init_path: str
    shapes: list[dict[str, Any]]  # Driver.shapes_setup(): each shape's slots and layout
    timing: RunnerTiming
    threads: int
    poison: bool
    env: dict[str, str]
    sys_path: list[str]
    profiling: RunnerProfiling | None


def candidate_setup(
    problem: LoadedProblem,
    driver: Driver,
    job: StagedJob,
    s: WorkerSettings,
    profiling: RunnerProfiling | None = None,
) -> CandidateSetup:
    """The setup frame of a candidate's runner; ``profiling`` when an outside tool wraps it."""
    return {
        "mode": "candidate",
        "device": problem.device,
        "module_path": f"{job['job']}/candidate.py",
        "init_path": f"{job['job']}/init.pt",
        "shapes": driver.shapes_setup(),
        "timing": {"sleep_cycles": 0 if profiling else s.sleep_cycles, "spin_s": s.spin_s},
        "threads": s.cpu_threads,
        "poison": True,
        "env": job.get("env", {}),
        "sys_path": job.get("sys_path", []),
        "profiling": profiling,
    }


def load_budget(s: WorkerSettings, job: StagedJob) -> float:
    return s.load_timeout_s + (s.build_timeout_s if job.get("deferred") else 0.0)


def reported_kernels(
    answer: dict[str, Any],  # free-form: the runner's answer as it came off the pipe
) -> tuple[list[list[Any]] | None, list[dict[str, Any]] | None]:
    """The kernel list and launches a runner's profiler reported, bounded and typed (still untrusted):
    ``[name, us]`` pairs, and the launches as it said them (free-form, read only by ``profile_parse``)."""
    listed = answer.get("kernels")
    kernels = (
        [
            [str(k[0])[:300], float(k[1])]
            for k in listed[:64]
            if isinstance(k, list) and len(k) == 2 and isinstance(k[1], (int, float))
        ]
        if isinstance(listed, list)
        else None
    )
    shown = answer.get("launches")
    launches = [x for x in shown[:64] if isinstance(x, dict)] if isinstance(shown, list) else None
    return kernels, launches


def jit_count(made: Made) -> int | None:
    """The Triton compilations and autotuning runs the candidate's process reported so far."""
    value = made.outcome.meta.get("jit")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
