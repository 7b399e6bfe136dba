"""A candidate runner's frames as the trusted side writes and reads them: the job the worker staged
for it, its setup frame and load budget, and what it reports of itself (its own profiler's kernels,
its JIT count), read as untrusted. Standard library and torch only.
"""

from __future__ import annotations

from typing import Any, TypedDict

from stark_mcp.evaluator.common.runner_wire import ProfilingSetup, RunnerSetup
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.trusted.driver import Driver, Made
from stark_mcp.evaluator.trusted.problem import LoadedProblem


class Staged(TypedDict):
    """Where a staged runner sees its files (``SpareRunners.stage``), for its setup frame."""

    job: str  # the folder with candidate.py (or problem.py) and init.pt
    slots: int  # rotating input slots of its driver
    deferred: bool  # its build finishes in the runner (the load's budget grows by the build's)
    env: dict[str, str]  # where the runner's builds and caches go
    sys_path: list[str]  # the problem's import roots


def candidate_setup(
    problem: LoadedProblem,
    driver: Driver,
    job: Staged,
    s: WorkerSettings,
    profiling: ProfilingSetup | None = None,
) -> RunnerSetup:
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


def load_budget(s: WorkerSettings, job: Staged) -> float:
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
