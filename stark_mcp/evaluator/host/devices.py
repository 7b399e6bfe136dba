"""The parent's devices and their trusted workers, for ``Evaluator`` (``service.py``).

Which device an evaluation runs on (one GPU model per process), the sandbox level found here, the
pool of warm trusted workers per device (one per chosen GPU, ``worker_handles.py``, leased whole by
``slot_pool.py``), this process's zygote, a worker started ahead of the evaluation that needs it, and
one worker command on a free worker. Every other part of the parent reaches a worker through
``ParentDevices.command``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from stark_mcp.device import Device
from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.device_probe import DeviceInfo, Prober
from stark_mcp.evaluator.host.gpu_choice import GpuChoice, choose_gpus, visible_physical
from stark_mcp.evaluator.host.priority import in_background
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.host.slot_pool import Slot, SlotPool
from stark_mcp.evaluator.host.verdict_dependencies import dependencies
from stark_mcp.evaluator.host.worker_handles import WorkerClient, WorkerCrashed
from stark_mcp.evaluator.sandbox.cgroups import remove_own, sweep_stale
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.forked import process_zygote
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, IsolationUnavailable, SandboxPolicy, detect
from stark_mcp.problems import Problem, ProblemError
from stark_mcp.problems.user_files import digest_bytes, user_files
from stark_mcp.records import Dependencies

WARM_LABEL = "start"  # a worker's start and first load ahead of its evaluation (``warm_worker``)


class ParentDevices:
    """The devices, the isolation and the pools of trusted workers of one ``Evaluator``."""

    def __init__(
        self,
        prober: Prober,
        gpus: tuple[int, ...] | None,
        cpu_workers: int,
        hidden: list[str],
        policy: SandboxPolicy,
        tool_paths: ToolPaths,
    ) -> None:
        self.prober = prober
        self.gpus = gpus  # None: every visible GPU
        self.cpu_workers = cpu_workers
        self.hidden = hidden
        self.policy = policy
        self.tool_paths = tool_paths
        self._gpu_choice: GpuChoice | None = None
        self._isolation: IsolationInfo | None = None
        self._pools: dict[str, SlotPool[WorkerClient]] = {}
        self.warming: set[asyncio.Task[None]] = set()  # workers loading a problem while a build runs
        self._zygote_start: asyncio.Future[Any] | None = None  # this process's zygote, started early
        self._tmp_dir: Path | None = None  # made on first use: an evaluator never entered leaves none

    async def stop_workers(self) -> None:
        """Wait for the zygote's start and shut every worker down (the warming tasks are cancelled
        with the evaluations, by ``Evaluator.__aexit__``)."""
        if self._zygote_start is not None:  # a thread: it cannot be cancelled, only awaited
            await asyncio.gather(self._zygote_start, return_exceptions=True)
        for pool in self._pools.values():
            await asyncio.gather(*(slot.handle.shutdown() for slot in pool.slots))

    def remove_files(self) -> None:
        """The problem and candidate files, and this evaluator's cgroup: last, after the builders."""
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None
        if self._isolation is not None and self._isolation.cgroup:
            remove_own(self._isolation.cgroup)
            sweep_stale(self._isolation.cgroup)

    # -- devices and isolation -----------------------------------------------------------------------
    async def resolve_device(self, device: Device | str = Device.AUTO) -> Device:
        """``auto`` -> cuda or cpu. The first call may start the probe process: off the event loop.
        Where the evaluator's callers' device becomes a ``Device`` (EvaluatorError if it is none)."""
        parsed = Device.parse(device, error=EvaluatorError)
        return await asyncio.to_thread(self.prober.resolve, parsed)

    async def device(self, device: Device | str) -> DeviceInfo:
        resolved = await self.resolve_device(device)
        if resolved is not Device.CUDA:
            return await asyncio.to_thread(self.prober.info, resolved)
        if self._gpu_choice is None:
            gpus = await asyncio.to_thread(self.prober.gpus)
            self._gpu_choice = choose_gpus(self.gpus, gpus, visible_physical(os.environ, len(gpus)))
        return self._gpu_choice.model

    async def isolation(self) -> IsolationInfo:
        if self._isolation is None:
            try:
                self._isolation = await asyncio.to_thread(detect, self.policy)
            except IsolationUnavailable as exc:
                raise EvaluatorError(str(exc)) from None
        return self._isolation

    async def dependencies(
        self, problem: Problem, info: DeviceInfo, settings: EvalSettings, source: Candidate | None = None
    ) -> Dependencies:
        """What a verdict on ``problem`` (and ``source``) depends on here (``verdict_dependencies.py``)."""
        isolation = await self.isolation()
        roots = getattr(problem, "import_roots", ())
        texts: list[str | ast.Module] = [problem.source]
        if source is not None and roots:  # the user files it imports: read from its one parse
            parsed = source.parsed
            texts += [] if isinstance(parsed, SyntaxError) else [parsed]
        return await asyncio.to_thread(dependencies, info, isolation.level, settings, roots, texts)

    # -- workers -------------------------------------------------------------------------------------
    def pool(self, info: DeviceInfo) -> SlotPool[WorkerClient]:
        key = f"{info.kind}:{info.name}"
        if key not in self._pools:
            if info.kind == "cuda":
                assert self._gpu_choice is not None  # device() chose the GPUs before any pool is asked for
                slots = [
                    Slot(
                        f"cuda:{index}",
                        WorkerClient("cuda", physical, self.hidden, self.policy, self.tool_paths),
                    )
                    for index, physical in zip(
                        self._gpu_choice.indices, self._gpu_choice.physical, strict=True
                    )
                ]
            else:
                slots = [
                    Slot(f"cpu:{n}", WorkerClient(info.kind, None, self.hidden, self.policy, self.tool_paths))
                    for n in range(self.cpu_workers)
                ]

            async def retire(slot: Slot[WorkerClient]) -> None:
                await slot.handle.shutdown()

            self._pools[key] = SlotPool(
                slots,
                what=f"evaluator's worker for {info.kind}",
                on_retire=retire,
                fault_types=(WorkerCrashed,),
            )
        return self._pools[key]

    @property
    def tmp(self) -> Path:
        """Where the problem and candidate files the worker reads are written."""
        if self._tmp_dir is None:
            self._tmp_dir = Path(tempfile.mkdtemp(prefix="stark-eval-"))
        return self._tmp_dir

    def problem_frame(self, problem: Problem, info: DeviceInfo, settings: EvalSettings) -> wire.LoadCommand:
        """The command that loads ``problem`` on a worker of ``info``'s device."""
        path = self.tmp / f"problem-{problem.hash}.py"
        if not path.exists():
            path.write_text(problem.source, encoding="utf-8")
        return wire.LoadCommand(
            key=loaded_key(problem),
            name=problem.name,
            path=str(path),
            settings=settings.worker_settings(info.kind),
            hidden=list(self.hidden),
            visible=[str(p) for p in getattr(problem, "import_roots", ())],
        )

    async def command(
        self,
        info: DeviceInfo,
        problem: Problem,
        settings: EvalSettings,
        frame: wire.Command,
        expect: set[type[wire.Answer]],
        timeout: float,
        progress: Callable[[wire.Progress], Awaitable[None]] | None = None,
        timings: dict[str, float] | None = None,
    ) -> wire.Answer:
        """One worker command on a free worker of the pool, retried on another if its worker crashed."""

        loading = self.problem_frame(problem, info, settings)
        if getattr(frame, "key", None) == problem.hash:  # the problem as loaded with the user's files now
            frame = dataclasses.replace(frame, key=loading.key)  # type: ignore[type-var]

        async def job(worker: WorkerClient) -> wire.Answer:
            return await worker.command(
                frame,
                expect=expect | {wire.ProblemError},
                timeout=timeout,
                on_progress=progress,
                problem=loading,
                timings=timings,
            )

        def waited(what: str, seconds: float) -> None:
            if timings is not None:  # a named phase of its own, never ``transfer``
                # a worker starting and loading the problem ahead of its evaluation (``warm_worker``)
                # is that evaluation's process start, however far it got before the command came
                name = "process_start" if what == WARM_LABEL else f"waiting:{what}"
                timings[name] = round(timings.get(name, 0.0) + seconds, 3)

        answer = await self.pool(info).run(
            job, label=_job_label(frame), background=in_background(), waited=waited
        )
        raise_problem_error(problem, answer)
        return answer

    def start_zygote(self) -> None:
        """Start this process's zygote (it imports torch: 1.5-5 s) in a thread now, while this
        evaluation probes the device, checks the source and stages it, rather than after all that
        when its first worker or builder asks for it (``process_zygote`` is shared and locked)."""
        if self.policy.fork and self._zygote_start is None:
            env = scrub_env(os.environ, {})
            self._zygote_start = asyncio.ensure_future(asyncio.to_thread(process_zygote, env))

    def warm_worker(
        self, info: DeviceInfo, problem: Problem, settings: EvalSettings, queue: bool = False
    ) -> None:
        """Start a worker and load the problem as soon as an evaluation knows it needs one (no cached
        verdict), before its dependencies, static checks, staging and any build: the worker's
        start-up (forked once the zygote has imported torch; a CUDA context, the reference, the
        problem's runners: seconds) then overlaps them rather than following them. Only on a free
        worker, unless ``queue`` (a build: long enough to wait for one). What is left of it when
        the evaluation's command comes is its ``process_start``; a failure is the evaluation's own
        to report (its command starts or loads again and says why)."""
        pool = self.pool(info)
        frame = self.problem_frame(problem, info, settings)
        key = frame.key
        free = [slot for slot in pool.live if not slot.busy]
        if any(slot.handle.loaded.get(key) for slot in free) or not (free or queue):
            return  # a free worker has it loaded already, or none is free to start on it now
        if any(task.get_name() == f"warm-{key}" for task in self.warming):
            return  # one is starting for it already: a second would only queue behind it

        async def warm() -> None:
            with contextlib.suppress(Exception):
                await pool.run(lambda worker: worker.load(frame), label=WARM_LABEL)

        task = asyncio.create_task(warm(), name=f"warm-{key}")
        self.warming.add(task)
        task.add_done_callback(self.warming.discard)


def raise_problem_error(problem: Problem, answer: wire.Answer) -> None:
    """A worker's ``problem_error`` answer as the ``ProblemError`` it stands for."""
    if isinstance(answer, wire.ProblemError):
        raise ProblemError(
            f"{problem.name}: {answer.step} failed: {answer.message}\n" + answer.traceback[-2000:]
        )


def _job_label(frame: wire.Command) -> str:
    """What a worker command is, as a waiting evaluation names it."""
    return f"baseline {frame.name}" if isinstance(frame, wire.BaselineCommand) else frame.NAME


def loaded_key(problem: Problem) -> str:
    """What a worker holds a loaded problem under: its hash, and for one that imports the user's code
    the digests of those files, so that a changed module is imported afresh, never run from the copy
    a worker loaded before (the worker forgets the old modules: ``trusted/worker.py``)."""
    roots = getattr(problem, "import_roots", ())
    if not roots:
        return problem.hash
    files = user_files(roots, [problem.source])
    return f"{problem.hash}-{digest_bytes(json.dumps(files, sort_keys=True).encode())[:8]}"
