"""What runs on a Ray cluster's nodes for ``--executor ray`` (``ray_executor.py``, the driver's side).

``EvaluationActor`` is one evaluation actor: an ``Evaluator`` on the device Ray gave it, whose every
answer is JSON text (a record's JSON, or ``{"error": ..., "message": ...}`` for a ``StarkError``),
never an object the driver would have to trust. ``build_on_node`` is the Ray CPU task that builds a
candidate into its node's build cache, where that node's actors find it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from stark_mcp.errors import StarkError
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.sandbox.levels import SandboxPolicy
from stark_mcp.problems import Problem, ProblemError, source_hash
from stark_mcp.records import Status


class ActorDescription(BaseModel):
    """What an evaluation actor says of itself once started: its process, its Ray node, its device."""

    pid: int
    node: str
    device: str
    info: DeviceInfo


class BuildAnswer(BaseModel):
    """What ``build_on_node`` sends back: built (``ok``), or the build's verdict and its logs."""

    ok: bool
    status: Status | None = None
    reason: str | None = None
    message: str = ""
    logs: dict[str, str] = Field(default_factory=dict)
    seconds: float = 0.0


def _text(record: BaseModel) -> str:
    """A record as the JSON text an actor or a task answers with (``json.dumps`` of its fields)."""
    return json.dumps(record.model_dump(mode="json"))


def _error_text(exc: StarkError) -> str:
    name = "ProblemError" if isinstance(exc, ProblemError) else "EvaluatorError"
    return json.dumps({"error": name, "message": str(exc)})


class EvaluationActor:
    """Runs inside a Ray actor: an ``Evaluator`` on this actor's device, answering in JSON text."""

    def __init__(
        self,
        cache_dir: str,
        settings: str,
        hidden: list[str],
        policy: str,
        device: str,
        tools: str,
        toolchain_dir: str,
    ) -> None:
        from stark_mcp.evaluator.host.service import Evaluator

        self.device = device
        self.evaluator = Evaluator(
            Path(cache_dir),
            EvalSettings.model_validate_json(settings),
            toolchain_dir=Path(toolchain_dir),
            hidden=[Path(h) for h in hidden],
            policy=SandboxPolicy.from_json(policy),
            tool_paths=ToolPaths.from_json(tools),
        )
        self.evaluator.integrity.key  # noqa: B018  the node's signing key exists before any build task races for it

    async def describe(self) -> str:
        import ray

        await self.evaluator.__aenter__()
        info = await self.evaluator.device_info(self.device)
        node = ray.get_runtime_context().get_node_id()
        return _text(ActorDescription(pid=os.getpid(), node=node, device=info.kind, info=info))

    async def isolation(self) -> str:
        return json.dumps(dataclasses.asdict(await self.evaluator.isolation()))

    async def check_problem(self, problem: str) -> str:
        try:
            await self.evaluator.check_problem(Problem.model_validate_json(problem), device=self.device)
        except StarkError as exc:
            return _error_text(exc)
        return "{}"

    async def baselines(self, problem: str, which: list[str] | None) -> str:
        try:
            found = await self.evaluator.baselines(
                Problem.model_validate_json(problem), device=self.device, which=which
            )
        except StarkError as exc:
            return _error_text(exc)
        return json.dumps({name: stats.model_dump(mode="json") for name, stats in found.items()})

    async def evaluate(
        self,
        problem: str,
        source: str,
        settings: str | None,
        use_cache: bool,
        wait_for_baselines: bool = True,
    ) -> str:
        try:
            evaluation = await self.evaluator.evaluate(
                Problem.model_validate_json(problem),
                source,
                device=self.device,
                settings=EvalSettings.model_validate_json(settings) if settings else None,
                use_cache=use_cache,
                wait_for_baselines=wait_for_baselines,
            )
        except StarkError as exc:
            return _error_text(exc)
        return evaluation.model_dump_json()

    async def baseline_shapes(self, problem: str, which: list[str] | None) -> str:
        try:
            found = await self.evaluator.baseline_shapes(
                Problem.model_validate_json(problem), device=self.device, which=which
            )
        except StarkError as exc:
            return _error_text(exc)
        return json.dumps(
            {
                name: {label: st.model_dump(mode="json") for label, st in by.items()}
                for name, by in found.items()
            }
        )

    async def profile(self, problem: str, source: str | None, settings: str | None) -> str:
        try:
            report = await self.evaluator.profile(
                Problem.model_validate_json(problem),
                source,
                device=self.device,
                settings=EvalSettings.model_validate_json(settings) if settings else None,
            )
        except StarkError as exc:
            return _error_text(exc)
        return report.model_dump_json()

    async def close(self) -> None:
        await self.evaluator.__aexit__(None, None, None)


def build_on_node(
    cache_dir: str,
    toolchain_dir: str,
    source: str,
    info: dict[str, Any],  # free-form: DeviceInfo's fields, as the driver hands them to Ray
    timeout: float,
    policy: str,
    hidden: list[str],
) -> str:
    """A Ray CPU task: build ``source`` into this node's build cache, where its actors look for it.
    Its builder is started by bubblewrap: Ray keeps a task's process for later tasks, and a zygote
    started here would outlive the task."""
    from stark_mcp.evaluator.host.candidate_builds import BuildCache
    from stark_mcp.evaluator.host.extension_builds import ExtensionCache
    from stark_mcp.evaluator.host.integrity import Integrity
    from stark_mcp.evaluator.sandbox.levels import detect

    root = Path(cache_dir)
    integrity = Integrity(root)
    cache = BuildCache(
        root / "builds",
        integrity,
        # this task's event loop ends with the build: background work would die unfinished
        ExtensionCache(root / "extensions", Path(toolchain_dir), integrity, background_pch=False),
        hidden=hidden,
    )
    outcome = asyncio.run(
        cache.build(
            source, source_hash(source), DeviceInfo(**info), timeout, detect(SandboxPolicy.from_json(policy))
        )
    )
    return _text(
        BuildAnswer(
            ok=outcome.ok,
            status=outcome.status,
            reason=outcome.reason,
            message=outcome.message,
            logs=outcome.logs,
            seconds=round(outcome.seconds, 3),
        )
    )
