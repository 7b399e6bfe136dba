"""Outside tools around a runner, after the evaluation: Nsight Compute for profiles, compute-sanitizer
for memory errors. Standard library and torch only.

Both run the candidate again in a jail of its own, never during timing, so neither can change a
verdict or a time. The tool is the jail's command, wrapped around the runner; the runner fetches its
descriptors from a socket in a writable mount (``RunnerHandle.start(connect=...)``), the tool writes
its report to a file in the same mount, and the worker reads that file once the jail has exited.
The tool runs inside the jail, as the candidate's uid: its report is untrusted data, read with a
size limit and parsed defensively (``profile_parse``, ``sanitizer_report``). HOME is the jail's
scratch, which ncu needs to be writable.

  profile:  ncu --csv --page raw --metrics <METRICS> --nvtx --nvtx-include stark_profile/ ... runner
            setup, one warm-up call, one call inside the NVTX range (the only one replayed), exit
  sanitize: compute-sanitizer --tool memcheck --print-limit 1 ... runner
            setup, calls on fresh inputs until one fails (or the budget ends), exit
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.control import ControlError
from stark_mcp.evaluator.common.frames import FrameError
from stark_mcp.evaluator.common.profile_parse import METRICS, ProfileParseError, parse_ncu_raw
from stark_mcp.evaluator.common.runner_wire import ProfilingSetup
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.trusted.candidate_frames import candidate_setup, load_budget, reported_kernels
from stark_mcp.evaluator.trusted.driver import Driver
from stark_mcp.evaluator.trusted.runners import RunnerDied, RunnerTimeout

NVTX_RANGE = "stark_profile"
LOG_LIMIT = 4 << 20  # bytes of a tool's report read back
EXIT_WAIT_S = 60.0  # after the runner left, the tool writes its report and exits
OUT_INSIDE = "/tmp/out"


@dataclass
class Tool:
    """An outside tool wrapped around a runner: its command (given the report's path inside the
    jail) and what its environment needs."""

    name: str
    argv: Callable[[str], list[str]]
    report: str
    env: dict[str, str] = field(default_factory=dict)


def ncu_command(ncu: str, log_file: str, launch_count: int) -> list[str]:
    """Counters for the kernels inside our NVTX range only, at the clocks the GPU runs at."""
    return [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        ",".join(METRICS),
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        f"{NVTX_RANGE}/",
        "--launch-count",
        str(launch_count),
        "--log-file",
        log_file,
    ]


def sanitizer_command(tool: str, log_file: str) -> list[str]:
    """memcheck, stopping its report after the first error."""
    return [
        tool,
        "--tool",
        "memcheck",
        "--print-limit",
        "1",
        "--target-processes",
        "all",
        "--log-file",
        log_file,
    ]


def read_report(path: str, limit: int = LOG_LIMIT) -> str:
    """A tool's report as text: a regular file only (the jail could plant a link), at most ``limit``
    bytes; empty when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        chunks, size = [], 0
        while size < limit:
            chunk = os.read(fd, min(1 << 20, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(fd)


def tool_budget(settings: WorkerSettings, job: wire.Job | None, timeout_s: float) -> float:
    """One wrapped run's budget (``timeout_s``, the tool's own); a candidate whose build is deferred to
    its runner builds again."""
    deferred = job is not None and job.deferred
    build = settings.build_timeout_s if deferred else 0.0
    return timeout_s + build


# ---- one wrapped run -----------------------------------------------------------------------------


@dataclass
class Outcome:
    report: str  # the tool's report file
    note: str  # what went wrong on our side, if anything
    # free-form: the last call's answer (a torch profile) as the untrusted runner wrote it
    meta: dict[str, Any] | None = None


def wrapped_run(
    worker: Any,
    state: Any,
    job: wire.Job | None,
    settings: WorkerSettings,
    tool: Tool | None,
    calls: Callable[[Driver, float], dict[str, Any] | None],  # free-form: returns a raw answer, as ``meta``
    budget_s: float,
    profiling: ProfilingSetup | None = None,
) -> Outcome:
    """Start the candidate's (or, ``job`` None, the reference's) runner under ``tool``, set it up, make
    ``calls``, ask it to exit and wait for the tool to finish; the report is read whatever happened."""
    deadline = time.monotonic() + budget_s
    spare = worker.spawn_runner(settings, tool)
    note, meta, driver = "", None, None
    try:
        staged = worker.stage(state, spare, job)
        problem = state.problem
        driver = Driver(problem, spare.runner, worker.tools, worker.slots(problem))
        if job is None:
            setup = {
                **candidate_setup(problem, driver, staged, settings, profiling),
                "mode": "reference",
                "module_path": f"{staged['job']}/problem.py",
                "poison": False,
            }
        else:
            setup = candidate_setup(problem, driver, staged, settings, profiling)
        left = min(deadline - time.monotonic(), load_budget(settings, staged) + 60.0)
        frame = spare.runner.setup(setup, driver.regions(), max(1.0, left))
        if frame.get("kind") != "ready":
            note = f"the module did not load: {str(frame.get('message', frame))[:500]}"
        else:
            meta = calls(driver, deadline)
            driver.exit(max(1.0, deadline - time.monotonic()))
        if tool is not None:
            spare.runner.jail.wait(max(1.0, min(EXIT_WAIT_S, deadline - time.monotonic())))
    except RunnerTimeout:
        note = f"the run passed its budget of {budget_s:g} s"
    except RunnerDied as died:
        note = f"the process {died.how}"
    except (ControlError, FrameError) as exc:
        note = f"invalid answer from the runner: {exc}"
    finally:
        report = read_report(os.path.join(spare.out, tool.report)) if tool is not None and spare.out else ""
        if note and spare.runner.log is not None:
            spare.runner.close()
            tail = spare.runner.log.text(1500).strip()
            if tail:
                note += f"; its output ends with: {tail[-800:]}"
        if driver is not None:
            driver.close()
        spare.discard()
        worker.memory_settled()
    return Outcome(report, note, meta)


# ---- the two commands ----------------------------------------------------------------------------


def profile(worker: Any, state: Any, cmd: wire.ProfileCommand, settings: WorkerSettings) -> wire.Profile:
    """Nsight Compute's report on one forward, or (``fallback``) the torch profiler's kernel list."""
    started = time.monotonic()
    budget = tool_budget(settings, cmd.job, settings.profile_timeout_s)
    shape = state.problem.shapes[0].label
    command: list[str] | None = None
    ncu = worker.outside.find("ncu")
    if ncu is None:
        reason = worker.outside.missing("ncu")
    else:
        launch_count = settings.profile_max_kernels
        tool = Tool("ncu", lambda out: ncu_command(ncu, f"{out}/ncu.csv", launch_count), "ncu.csv")
        command = ncu_command(ncu, f"{OUT_INSIDE}/ncu.csv", launch_count)

        def warm_and_profile(driver: Driver, deadline: float) -> None:
            driver.call(0, max(1.0, deadline - time.monotonic()))
            driver.profile(0, max(1.0, deadline - time.monotonic()))

        outcome = wrapped_run(
            worker, state, cmd.job, settings, tool, warm_and_profile, budget, {"nvtx": NVTX_RANGE}
        )
        try:
            parse_ncu_raw(outcome.report)
            return wire.Profile(
                shape=shape,
                source="ncu",
                reason=outcome.note,
                seconds=round(time.monotonic() - started, 3),
                command=command,
                report=outcome.report,
            )
        except ProfileParseError as exc:
            reason = f"ncu gave no counters: {exc}" + (f" ({outcome.note})" if outcome.note else "")
    reason = reason[:2000]
    source, kernels, launches = "none", None, None
    if cmd.fallback:

        def torch_profile(driver: Driver, deadline: float) -> dict[str, Any] | None:  # free-form: as meta
            driver.call(0, max(1.0, deadline - time.monotonic()))
            got = driver.profile(0, max(1.0, deadline - time.monotonic()), meta=True)
            return got if isinstance(got, dict) else None

        outcome = wrapped_run(worker, state, cmd.job, settings, None, torch_profile, budget)
        if outcome.meta:
            kernels, launches = reported_kernels(outcome.meta)
            source = "torch_profiler"
        elif outcome.note:
            reason += f"; the torch profiler's run failed too: {outcome.note}"[:1500]
    return wire.Profile(
        shape=shape,
        source=source,
        reason=reason,
        seconds=round(time.monotonic() - started, 3),
        command=command,
        kernels=kernels,
        launches=launches,
    )


def sanitize(
    worker: Any, state: Any, cmd: wire.SanitizeCommand, settings: WorkerSettings
) -> wire.Sanitized:
    """compute-sanitizer's report on a candidate that failed with a memory error."""
    started = time.monotonic()
    tool_path = worker.outside.find("compute-sanitizer")
    if tool_path is None:
        return wire.Sanitized(report="", seconds=0.0, reason=worker.outside.missing("compute-sanitizer"))
    # Without the caching allocator every tensor is its own allocation, so an access past the end of
    # one is out of bounds for memcheck rather than inside torch's pool.
    tool = Tool(
        "compute-sanitizer",
        lambda out: sanitizer_command(tool_path, f"{out}/sanitizer.log"),
        "sanitizer.log",
        env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    )
    trials = max(1, settings.trials)

    def until_failure(driver: Driver, deadline: float) -> None:
        for shape in range(len(state.problem.shapes)):
            for _ in range(trials):
                made = driver.call(shape, max(1.0, deadline - time.monotonic()))
                if made.outcome.meta.get("ok") is not True:
                    return

    budget = tool_budget(settings, cmd.job, settings.sanitize_timeout_s)
    outcome = wrapped_run(worker, state, cmd.job, settings, tool, until_failure, budget)
    return wire.Sanitized(
        report=outcome.report[: 256 << 10], reason=outcome.note, seconds=round(time.monotonic() - started, 3)
    )
