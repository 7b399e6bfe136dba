"""``--executor ray``: one evaluation actor per GPU of a Ray cluster, builds as Ray CPU tasks.

Each actor runs the same ``Evaluator`` as the local executor (its own trusted worker, the same
sandbox and trust boundary on its node), pinned to the GPU Ray gave it (``{"GPU": 1}``); on a
cluster without GPUs, one actor per spare CPU slot evaluates on the CPU (for tests). The database
and the search stay in the driver. What an actor sends back is JSON text, validated into the
pydantic records on receipt and checked against what was asked; a dict from an actor is never
trusted as is. A build runs as a CPU task on the node of the actor that will time it (the build
cache is per node); a dead actor is replaced and its evaluation retried on another through the
same pool as the local executor. Ray is an optional extra: ``pip install 'stark-mcp[ray]'``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from stark_mcp.config import default_toolchain_dir
from stark_mcp.device import Device
from stark_mcp.errors import StarkError
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.ray_actor import ActorDescription, BuildAnswer, EvaluationActor, build_on_node
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.host.slot_pool import Slot, SlotPool
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, SandboxPolicy
from stark_mcp.problems import Problem, ProblemError
from stark_mcp.progress import Progress
from stark_mcp.records import Evaluation, ProfileReport, TimingStats

INSTALL_HINT = "pip install 'stark-mcp[ray]'"
_BASELINES = TypeAdapter(dict[str, TimingStats])
_BASELINE_SHAPES = TypeAdapter(dict[str, dict[str, TimingStats]])
_ERRORS: dict[str, type[StarkError]] = {"ProblemError": ProblemError, "EvaluatorError": EvaluatorError}


class ActorLost(EvaluatorError):
    """An evaluation actor died (its node, process or GPU failed) while serving a job."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EvaluatorError(
            f"--executor ray needs Ray, which is not installed here: {INSTALL_HINT}"
        ) from None
    return ray


def _problem_text(problem: Problem) -> str:
    return problem.model_dump_json(exclude={"hash"})


@dataclasses.dataclass
class _Actor:
    """A pool slot's actor, replaced when it dies (the slot stays; Ray finds it a GPU again)."""

    handle: Any = None  # a Ray actor handle (Ray's types are not ours to name)
    node: str = ""
    pid: int = 0
    info: DeviceInfo | None = None  # None until it described itself


class RayExecutor:
    """The ``Executor`` over a Ray cluster; see the module docstring and docs/scale.md."""

    def __init__(
        self,
        cache_dir: Path,
        settings: EvalSettings | None = None,
        *,
        hidden: list[Path] | None = None,
        policy: SandboxPolicy | None = None,
        tool_paths: ToolPaths | None = None,
        address: str | None = None,
        actors: int | None = None,
        toolchain_dir: Path | None = None,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self.toolchain_dir = Path(toolchain_dir) if toolchain_dir else default_toolchain_dir(self.cache_dir)
        self.settings = settings or EvalSettings()
        self.hidden = [str(p) for p in [self.cache_dir, self.toolchain_dir, *(hidden or [])]]
        self.policy = policy or SandboxPolicy()
        self.tool_paths = tool_paths or ToolPaths()
        self.address = address
        self.wanted = actors
        self.device = Device.CPU
        self.model = ""
        self._ray: Any = None
        self._started_ray = False
        self._pool: SlotPool[_Actor] | None = None
        self._actor_class: Any = None
        self._build_task: Any = None
        self._actor_options: dict[str, int] = {}  # Ray's resources for one actor

    # -- lifetime ------------------------------------------------------------------------------------
    async def __aenter__(self) -> RayExecutor:
        ray = self._ray = import_ray()
        if not ray.is_initialized():
            await asyncio.to_thread(
                ray.init, address=self.address, include_dashboard=False, log_to_driver=False
            )
            self._started_ray = True
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        if gpus:
            self.device, count = Device.CUDA, gpus
            self._actor_options = {"num_gpus": 1, "num_cpus": 0}
        else:  # tests: CPU slots stand in for GPUs, one CPU left for builds
            self.device, count = Device.CPU, max(1, int(resources.get("CPU", 1)) - 1)
            self._actor_options = {"num_cpus": 1}
        count = min(count, self.wanted or count)
        self._actor_class = ray.remote(EvaluationActor)
        self._build_task = ray.remote(num_cpus=1)(build_on_node)
        slots = [Slot(f"{self.device}:{n}", _Actor()) for n in range(count)]
        try:
            await asyncio.gather(*(self._start(slot.handle) for slot in slots))
        except BaseException:
            await self._close(slots)
            raise
        models = {slot.handle.info.name for slot in slots if slot.handle.info is not None}
        if len(models) > 1:
            await self._close(slots)
            raise EvaluatorError(
                f"the Ray cluster mixes GPU models ({', '.join(sorted(models))}); a run is timed on one "
                "model: give stark-mcp a cluster of one model"
            )
        self.model = models.pop()

        async def retire(slot: Slot[_Actor]) -> None:
            await self._close([slot])

        self._pool = SlotPool(slots, what="Ray evaluation actor", on_retire=retire, fault_types=(ActorLost,))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pool is not None:
            await self._close(self._pool.slots)
        if self._started_ray:
            await asyncio.to_thread(self._ray.shutdown)

    async def settle(self, waiting: Callable[[int], None] | None = None) -> None:
        """Nothing to wait for: builds on a Ray node make their precompiled header before building."""

    async def _start(self, actor: _Actor) -> None:
        handle = self._actor_class.options(**self._actor_options).remote(
            str(self.cache_dir),
            self.settings.model_dump_json(),
            self.hidden,
            self.policy.to_json(),
            self.device,
            self.tool_paths.to_json(),
            str(self.toolchain_dir),
        )
        try:
            text = await handle.describe.remote()
        except self._ray.exceptions.RayError as exc:
            raise EvaluatorError(f"a Ray evaluation actor did not start: {exc}") from None
        try:
            described = ActorDescription.model_validate_json(text)
        except ValidationError as exc:
            message = exc.errors()[0]["msg"]
            raise EvaluatorError(f"a Ray evaluation actor described itself wrongly: {message}") from None
        actor.handle, actor.node, actor.pid = handle, described.node, described.pid
        actor.info = described.info

    async def _close(self, slots: list[Slot[_Actor]]) -> None:
        for slot in slots:
            if slot.handle.handle is not None:
                try:
                    await asyncio.wait_for(slot.handle.handle.close.remote(), 30)
                except Exception:  # noqa: BLE001  closing a dead actor: nothing left to close
                    pass
                self._ray.kill(slot.handle.handle)
                slot.handle.handle = None

    async def _call(self, actor: _Actor, method: str, *args: Any) -> str:
        """One actor call; a dead actor is dropped (the next lease starts a new one) and reported a fault."""
        if actor.handle is None:
            await self._start(actor)
        try:
            return await getattr(actor.handle, method).remote(*args)
        except self._ray.exceptions.RayActorError as exc:
            actor.handle = None
            raise ActorLost(f"a Ray evaluation actor died: {str(exc)[:300]}") from None

    def _pool_or_fail(self) -> SlotPool[_Actor]:
        if self._pool is None:
            raise EvaluatorError("the Ray executor is not open: use it as 'async with'")
        return self._pool

    # -- the Executor protocol -------------------------------------------------------------------------
    async def prepare(self, device: Device | str = Device.AUTO) -> list[str]:
        """Nothing here: each actor's evaluator makes its node's shared build files with its first build."""
        return []

    async def resolve_device(self, device: Device | str = Device.AUTO) -> Device:
        device = Device.parse(device, error=EvaluatorError)
        if device not in (Device.AUTO, self.device):
            raise EvaluatorError(
                f"device {device!r} was requested but this Ray cluster's evaluation actors run on "
                f"{self.device}; use --device {self.device} or auto"
            )
        return self.device

    async def device_name(self, device: Device | str = Device.AUTO) -> str:
        await self.resolve_device(device)
        return self.model

    async def slots(self, device: Device | str = Device.AUTO) -> int:
        await self.resolve_device(device)
        return len(self._pool_or_fail().live)

    async def isolation(self) -> IsolationInfo:
        text = await self._pool_or_fail().run(lambda actor: self._call(actor, "isolation"))
        try:
            return IsolationInfo(**json.loads(text))
        except (ValueError, TypeError) as exc:
            raise EvaluatorError(f"an evaluation actor sent an invalid isolation report: {exc}") from None

    async def check_problem(self, problem: Problem, device: Device | str = Device.AUTO) -> None:
        await self.resolve_device(device)
        text = await self._pool_or_fail().run(
            lambda a: self._call(a, "check_problem", _problem_text(problem))
        )
        _raise_error(_object(text))

    async def baseline_shapes(
        self,
        problem: Problem,
        device: Device | str = Device.AUTO,
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, dict[str, TimingStats]]:
        await self.resolve_device(device)
        names = None if which is None else list(which)
        text = await self._pool_or_fail().run(
            lambda a: self._call(a, "baseline_shapes", _problem_text(problem), names)
        )
        data = _object(text)
        _raise_error(data)
        try:
            return _BASELINE_SHAPES.validate_python(data)
        except ValidationError as exc:
            message = exc.errors()[0]["msg"]
            raise EvaluatorError(f"an evaluation actor sent invalid baselines: {message}") from None

    async def profile(
        self,
        problem: Problem,
        source: str | Candidate | None,
        device: Device | str = Device.AUTO,
        settings: EvalSettings | None = None,
        progress: Progress | None = None,
    ) -> ProfileReport:
        await self.resolve_device(device)
        source = source.source if isinstance(source, Candidate) else source  # an actor parses its own
        settings_text = settings.model_dump_json() if settings else None
        text = await self._pool_or_fail().run(
            lambda a: self._call(a, "profile", _problem_text(problem), source, settings_text)
        )
        _raise_error(_object(text))
        try:
            return ProfileReport.model_validate_json(text)
        except ValidationError as exc:
            message = exc.errors()[0]["msg"]
            raise EvaluatorError(f"an evaluation actor sent an invalid profile: {message}") from None

    async def baselines(
        self,
        problem: Problem,
        device: Device | str = Device.AUTO,
        which: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, TimingStats]:
        await self.resolve_device(device)
        names = None if which is None else list(which)
        if progress is not None:
            await progress(
                0.0, 1.0, f"baselines on the Ray cluster: {', '.join(names or self.settings.baselines)}"
            )
        text = await self._pool_or_fail().run(
            lambda a: self._call(a, "baselines", _problem_text(problem), names)
        )
        data = _object(text)
        _raise_error(data)
        try:
            return _BASELINES.validate_python(data)
        except ValidationError as exc:
            raise EvaluatorError(
                f"an evaluation actor sent invalid baselines: {exc.errors()[0]['msg']}"
            ) from None

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
        await self.resolve_device(device)
        candidate = Candidate.of(source)
        s = settings or self.settings
        pool = self._pool_or_fail()
        started = time.monotonic()
        node: str | None = None
        static = candidate.static
        if static.status is None and static.needs_build:
            if progress is not None:
                await progress(1.0, 5.0, "build")
            node, failed = await self._build(candidate, s, static.flags)
            if failed is not None:
                return failed.model_copy(
                    update={
                        "wall_seconds": round(time.monotonic() - started, 3),
                        "problem_hash": problem.hash,
                    }
                )
        text = await pool.run(
            lambda a: self._call(
                a,
                "evaluate",
                _problem_text(problem),
                candidate.source,
                s.model_dump_json() if settings else None,
                use_cache,
                wait_for_baselines,
            ),
            prefer=None if node is None else (lambda slot: slot.handle.node == node),
        )
        data = _object(text)
        _raise_error(data)
        try:
            evaluation = Evaluation.model_validate(data)
        except ValidationError as exc:
            raise EvaluatorError(
                f"an evaluation actor sent an invalid evaluation: {exc.errors()[0]['msg']}"
            ) from None
        asked = (problem.hash, candidate.hash, self.model)
        got = (evaluation.problem_hash, evaluation.source_hash, evaluation.device_name)
        if got != asked:
            raise EvaluatorError(f"an evaluation actor answered for {got}, not for what was asked {asked}")
        if progress is not None:
            await progress(5.0, 5.0, f"done: {evaluation.status.value}")
        return evaluation

    async def _build(
        self, candidate: Candidate, s: EvalSettings, flags: list[str]
    ) -> tuple[str, Evaluation | None]:
        """Build on the node with the most free actors; a failed build is the evaluation's verdict."""
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        live = self._pool_or_fail().live
        counts: dict[str, int] = {}
        for slot in live:
            if slot.handle.node:
                counts[slot.handle.node] = counts.get(slot.handle.node, 0) + (0 if slot.busy else 1)
        node = max(counts, key=lambda n: counts[n]) if counts else ray.get_runtime_context().get_node_id()
        info = next((slot.handle.info for slot in live if slot.handle.node == node), live[0].handle.info)
        assert info is not None  # every live actor described itself when it started
        task = self._build_task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        text = await task.remote(
            str(self.cache_dir), str(self.toolchain_dir), candidate.source, dataclasses.asdict(info),
            s.build_timeout_s,
            self.policy.to_json(), self.hidden,
        )  # fmt: skip
        try:
            answer = BuildAnswer.model_validate(_object(text))
        except ValidationError as exc:
            message = exc.errors()[0]["msg"]
            raise EvaluatorError(f"a Ray build task sent an invalid outcome: {message}") from None
        if answer.ok:
            return node, None
        try:
            failed = Evaluation(
                status=answer.status,
                reason=answer.reason,
                message=answer.message,
                logs=answer.logs,
                flags=list(flags),
                phase_seconds={"build": answer.seconds},
                device=self.device,
                device_name=self.model,
                source_hash=candidate.hash,
                settings_hash=s.settings_hash,
            )
        except ValidationError as exc:  # a failure without a status
            raise EvaluatorError(f"a Ray build task sent an invalid outcome: {exc}") from None
        return node, failed


def _object(text: object) -> dict[str, Any]:  # free-form: an answer's JSON, before validation
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise EvaluatorError(
            f"an evaluation actor sent something that is not a JSON object: {str(text)[:200]}"
        )
    return data


def _raise_error(data: dict[str, Any]) -> None:  # free-form: an answer's JSON, before validation
    if "error" in data:
        raise _ERRORS.get(str(data["error"]), EvaluatorError)(str(data.get("message", "")))
