"""The parent's problem checks and baselines, for ``Evaluator`` (``service.py``).

A problem is checked by loading it on a worker (import, reference, inputs for every shape), once
per evaluator and device. Its baselines (eager and the compile modes) are timed by a worker and kept
in the signed baseline cache; a cached compile baseline is used only while eager measured beside the
candidate still agrees with eager measured beside it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence, Set
from pathlib import Path

from stark_mcp.device import Device
from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.host import worker_results
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.devices import ParentDevices, raise_problem_error
from stark_mcp.evaluator.host.integrity import Integrity
from stark_mcp.evaluator.host.settings import BASELINE_NAMES, EvalSettings
from stark_mcp.evaluator.host.signed_caches import BaselineCache, BaselineEntry, BaselineShape
from stark_mcp.evaluator.host.timing_stats import timing_stats
from stark_mcp.evaluator.host.verdict_dependencies import stack_tag
from stark_mcp.evaluator.sandbox.jail_files import unreadable_root
from stark_mcp.problems import Problem, ProblemError
from stark_mcp.progress import Progress
from stark_mcp.records import TimingStats

STALE_BASELINE = 0.10  # a cached compile baseline is used only if eager now agrees with eager then


class ParentBaselines:
    """Checks problems and times, caches and re-validates their baselines on the devices' workers."""

    def __init__(
        self, devices: ParentDevices, cache_dir: Path, integrity: Integrity, settings: EvalSettings
    ) -> None:
        self.devices = devices
        self.cache_dir = cache_dir
        self.integrity = integrity
        self.settings = settings
        self._baseline_locks: dict[Path, asyncio.Lock] = {}
        # (problem key, device) checked by a worker of this evaluator: evaluations load the problem
        # themselves, so checking it again need not queue behind a worker busy with other work.
        self._checked: set[tuple[str, str]] = set()

    # -- problems ------------------------------------------------------------------------------------
    async def check_problem(self, problem: Problem, device: Device | str = Device.AUTO) -> None:
        """Import, build the reference, generate inputs for every shape, run it, check it fits."""
        await self._check_import_roots(problem)
        info = await self.devices.device(device)
        frame = self.devices.problem_frame(problem, info, self.settings)
        checked = (frame.key, info.name)
        if checked in self._checked:
            return
        answer = await self.devices.pool(info).run(lambda worker: worker.load(frame))
        raise_problem_error(problem, answer)
        self._checked.add(checked)

    async def _check_import_roots(self, problem: Problem) -> None:
        """The trusted worker runs as us; candidates and baselines may run as a uid of their own,
        which must be able to import the user's code: refuse now, with the folder to fix."""
        roots = getattr(problem, "import_roots", ())
        if not roots:
            return
        info = await self.devices.isolation()
        if not (info.root and info.level in ("sandbox", "uid")):
            return
        for root in roots:
            blocked = await asyncio.to_thread(unreadable_root, root, info.level, self.devices.hidden)
            if blocked is not None:
                raise ProblemError(
                    f"{problem.name}: candidates run as a user of their own (isolation {info.level}), who "
                    f"cannot read {blocked} on the way to the import root {root}; make it readable "
                    f"(chmod o+rx {blocked}) or move the project"
                )

    # -- baselines -----------------------------------------------------------------------------------
    async def baselines(
        self,
        problem: Problem,
        device: Device | str = Device.AUTO,
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, TimingStats]:
        per_shape = await self.baseline_shapes(problem, device, which, progress)
        return {n: worker_results.aggregate(list(per.values())) for n, per in per_shape.items()}

    async def baseline_shapes(
        self,
        problem: Problem,
        device: Device | str = Device.AUTO,
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, dict[str, TimingStats]]:
        """Like ``baselines``, per declared shape (name -> shape label -> stats): what it takes to
        add a baseline timed later to evaluations made before it (``worker_results.with_baselines``)."""
        info = await self.devices.device(device)
        entries = await self._baseline_entries(
            problem, info, which, self.settings, progress, time_missing=True
        )
        return _shape_stats(entries)

    async def compile_baselines(
        self,
        problem: Problem,
        info: DeviceInfo,
        s: EvalSettings,
        result: worker_results.WorkerResult,
        wait: bool = True,
    ) -> dict[str, dict[str, TimingStats]]:
        """Cached compile baselines, re-timed when eager then and eager now disagree; with
        ``wait=False`` only those already cached and agreeing with eager now (another task may be
        timing the rest)."""
        names = [n for n in s.baselines if n != "eager"]
        if not names:
            return {}
        eager_now = {
            sh.label: timing_stats(sh.baseline_ms).median_ms for sh in result.shapes if sh.baseline_ms
        }
        entries = await self._baseline_entries(problem, info, names, s, None, time_missing=wait)
        stale = {n for n, e in entries.items() if not _agrees(e, eager_now)}
        if not wait:  # no re-timing either: the caller fills in its own figure (baseline_pending)
            return _shape_stats({n: e for n, e in entries.items() if n not in stale})
        if stale:
            entries.update(
                await self._baseline_entries(
                    problem, info, sorted(stale), s, None, time_missing=True, stale=stale
                )
            )
            for name in sorted(stale):
                if not _agrees(entries.get(name), eager_now):
                    result.findings.append(
                        f"{name}: the cached and re-timed figures both disagree with eager "
                        "measured beside the candidate by more than 10%"
                    )
        return _shape_stats(entries)

    async def _baseline_entries(
        self,
        problem: Problem,
        info: DeviceInfo,
        which: Sequence[str] | None,
        settings: EvalSettings,
        progress: Progress | None,
        time_missing: bool,
        stale: Set[str] = frozenset(),
    ) -> dict[str, BaselineEntry]:
        names = list(settings.baselines if which is None else which)
        unknown = [n for n in names if n not in BASELINE_NAMES]
        if unknown:
            raise EvaluatorError(f"unknown baseline(s) {unknown}; choose from {list(BASELINE_NAMES)}")
        isolation = await self.devices.isolation()
        cache = BaselineCache(
            self.cache_dir / "baselines", self.integrity, reuse=isolation.level != "process"
        )
        deps = await self.devices.dependencies(problem, info, settings)
        path = cache.path(problem.hash, info.name, info.torch_version, settings.timing_hash, stack_tag(deps))
        if not time_missing:  # what is cached now; never wait behind a task timing the rest
            entries = cache.load(path)
            return {n: entries[n] for n in names if n in entries}
        lock = self._baseline_locks.setdefault(path, asyncio.Lock())
        async with lock:
            entries = cache.load(path)
            missing = [n for n in names if n not in entries or n in stale]
            for i, name in enumerate(missing):
                if progress is not None:
                    await progress(float(i), float(len(missing)), f"baseline {name}")
                entries[name] = await self._time_baseline(problem, info, name, settings)
                cache.store(path, entries)  # each as it is timed: a slow later one delays no earlier one
        return {n: entries[n] for n in names if n in entries}

    async def _time_baseline(
        self, problem: Problem, info: DeviceInfo, name: str, settings: EvalSettings
    ) -> BaselineEntry:
        answer = await self.devices.command(
            info,
            problem,
            settings,
            wire.BaselineCommand(key=problem.hash, name=name, settings=settings.worker_settings(info.kind)),
            {wire.Baseline, wire.BaselineMissing},
            settings.baseline_timeout_s + 120,
        )
        if isinstance(answer, wire.BaselineMissing):
            return BaselineEntry(missing=answer.message[:3000])
        assert isinstance(answer, wire.Baseline)
        try:
            shapes = [
                BaselineShape(
                    label=str(s["label"]),
                    stats=timing_stats(s["samples_ms"]),
                    eager=timing_stats(s["eager_ms"]),
                )
                for s in answer.shapes
            ]
        except (KeyError, TypeError, ValueError) as exc:
            return BaselineEntry(missing=f"{name}: invalid timing answer: {exc}")
        return BaselineEntry(shapes=shapes, mode=answer.mode, first_calls_s=answer.first_calls_s)


def _agrees(entry: BaselineEntry | None, eager_now: dict[str, float]) -> bool:
    if entry is None or entry.shapes is None:
        return True  # a missing baseline has nothing to validate
    for shape in entry.shapes:
        now = eager_now.get(shape.label)
        then = shape.eager.median_ms if shape.eager is not None else None
        if now is None or not then or abs(then / now - 1.0) > STALE_BASELINE:
            return False
    return True


def _shape_stats(entries: dict[str, BaselineEntry]) -> dict[str, dict[str, TimingStats]]:
    return {
        name: {s.label: s.stats for s in entry.shapes}
        for name, entry in entries.items()
        if entry.shapes is not None
    }
