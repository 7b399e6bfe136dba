"""Where the adapters come in: a ``RunService`` over the configured store and evaluator, a
one-off evaluation for ``stark-mcp eval``, and a problem from the user's code for
``stark-mcp problem new``.

The CLI and the MCP server open everything through here, from the one ``Settings`` read when
the process started, and parse evaluator options into ``EvalSettings`` here, so neither needs
to know how the store, the evaluator or the prompt templates are put together.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from pydantic import ValidationError

from stark_mcp.agents.templates import PromptTemplates
from stark_mcp.config import Settings
from stark_mcp.device import Device
from stark_mcp.evaluator import BASELINE_NAMES, EvalSettings
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.executor import Executor, open_executor
from stark_mcp.orchestrator.early_start import sandbox_policy
from stark_mcp.orchestrator.errors import InvalidInput
from stark_mcp.orchestrator.eval_options import parse_eval_settings
from stark_mcp.orchestrator.own_module import CreatedProblem, create_problem
from stark_mcp.orchestrator.reads import RunReads
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.verify import (
    TOLERANCE,
    Evidence,
    Verification,
    compare,
    evidence_of,
    read_evidence,
)
from stark_mcp.problems import Problem, load_problem
from stark_mcp.progress import Progress
from stark_mcp.records import Evaluation, ProfileReport
from stark_mcp.store import Store
from stark_mcp.usercode.request import ProblemRequest

__all__ = [
    "BASELINE_NAMES",
    "EvalSettings",
    "create_user_problem",
    "evaluate_candidate",
    "evaluate_on",
    "open_reads",
    "open_service",
    "parse_eval_settings",
    "verify_kernel",
]


def data_dirs(settings: Settings) -> list[Path]:
    """What no candidate may see: the data directory and the database's folder (the cache is hidden
    by the evaluator itself)."""
    return [settings.home, settings.database.parent]


def isolation_report(settings: Settings) -> tuple[str | None, list[str], str | None]:
    """(level, what doctor prints about it, why the configured level is refused) on this machine."""
    from stark_mcp.evaluator.sandbox.levels import IsolationUnavailable, detect, doctor_lines

    try:
        info = detect(sandbox_policy(settings))
    except IsolationUnavailable as exc:
        return None, [], str(exc)
    return info.level, doctor_lines(info), None


def tool_paths(settings: Settings) -> ToolPaths:
    """Where the evaluator finds Nsight Compute and compute-sanitizer (profiles, memory errors)."""
    return ToolPaths(ncu=settings.ncu, compute_sanitizer=settings.compute_sanitizer)


def open_evaluator(settings: Settings, eval_settings: EvalSettings | None = None) -> Executor:
    """The evaluator on ``settings.cache``, hiding the data directories, at the configured isolation,
    on the configured executor (this host's GPUs of ``settings.gpus``, or a Ray cluster)."""
    return open_executor(
        settings.executor,
        settings.cache,
        eval_settings or EvalSettings(),
        hidden=data_dirs(settings),
        policy=sandbox_policy(settings),
        tool_paths=tool_paths(settings),
        gpus=settings.gpus,
        ray_address=settings.ray_address,
        toolchain_dir=settings.toolchain,
    )


@asynccontextmanager
async def open_service(
    settings: Settings, eval_settings: EvalSettings | None = None
) -> AsyncIterator[RunService]:
    """The store at ``settings.database``, the evaluator on ``settings.cache`` and the prompt
    templates of ``settings.prompts_dir``, open for the life of the block."""
    templates = PromptTemplates(settings.prompts_dir)
    async with (
        await Store.open(settings.database) as store,
        open_evaluator(settings, eval_settings) as evaluator,
    ):
        service = RunService(store, evaluator, templates, memory=settings.memory)
        await service.interrupt_orphaned_runs()  # runs left 'running' by a process that is gone
        try:
            yield service
        finally:
            await service.aclose()  # background baselines stop before the evaluator and store close


@asynccontextmanager
async def open_reads(settings: Settings) -> AsyncIterator[RunReads]:
    """The read side alone, over the store at ``settings.database``: no evaluator, no caches."""
    async with await Store.open(settings.database) as store:
        yield RunReads(store)


async def evaluate_candidate(
    settings: Settings,
    problem: str | Problem,
    source: str,
    *,
    device: Device,
    eval_settings: EvalSettings,
    use_cache: bool = True,
    progress: Progress | None = None,
    on_result: Callable[[Evaluation], None] | None = None,
    waiting: Callable[[int], None] | None = None,
    wait_for_baselines: bool = True,
    profile: bool = False,
    on_profile: Callable[[ProfileReport], None] | None = None,
) -> Evaluation:
    """One trusted evaluation of ``source`` against the problem spec ``problem`` (or the problem
    itself); nothing recorded.

    ``on_result`` gets the verdict as soon as it is known, without a profile: the profile (Nsight
    Compute, 5-9 s on an H200) is taken after it, only with ``profile``, and handed to
    ``on_profile``. ``wait_for_baselines=False``: compile baselines not cached yet are not timed
    (flagged ``baseline_pending:<name>``). Then this call waits for the background work later
    builds use (a precompiled header: a process that exits would stop it, and every later ``eval``
    would start it again), calling ``waiting(jobs)`` first if there is any."""
    loaded = load_problem(problem) if isinstance(problem, str) else problem
    async with open_evaluator(settings, eval_settings) as evaluator:
        evaluation = await evaluate_on(
            evaluator, loaded, source, device=device, eval_settings=eval_settings, use_cache=use_cache,
            progress=progress, on_result=on_result, wait_for_baselines=wait_for_baselines,
            profile=profile, on_profile=on_profile,
        )
        await evaluator.settle(waiting)
        return evaluation


async def evaluate_on(
    evaluator: Executor,
    problem: Problem,
    source: str | Candidate,
    *,
    device: Device,
    eval_settings: EvalSettings,
    use_cache: bool = True,
    progress: Progress | None = None,
    on_result: Callable[[Evaluation], None] | None = None,
    wait_for_baselines: bool = True,
    profile: bool = False,
    on_profile: Callable[[ProfileReport], None] | None = None,
) -> Evaluation:
    """``evaluate_candidate``'s evaluation on an evaluator already open (a warm evaluator's, which
    outlives the call and so leaves its background work running). The verdict and the profile after
    it read one ``Candidate``: the source is parsed and checked once."""
    candidate = Candidate.of(source)
    evaluation = await evaluator.evaluate(
        problem, candidate, device=device, settings=eval_settings.model_copy(update={"profile": False}),
        use_cache=use_cache, progress=progress, wait_for_baselines=wait_for_baselines,
    )
    if on_result is not None:
        on_result(evaluation)
    if profile and evaluation.passed and evaluation.profile is None:
        report = await evaluator.profile(
            problem, candidate, device=device, settings=eval_settings, progress=progress
        )
        evaluation = evaluation.model_copy(update={"profile": report})
        if on_profile is not None:
            on_profile(report)
    return evaluation


async def verify_kernel(
    settings: Settings,
    target: str,
    *,
    node_id: str | None = None,
    tolerance: float = TOLERANCE,
    device: Device | None = None,
) -> Verification:
    """``stark-mcp verify``: a run's node (default: its best) or an exported file evaluated again from
    scratch, in a cache of its own (nothing reused: no build, no baseline, no verdict), with the run's
    evaluator settings and the eager baseline timed side by side, against its recorded figures
    (``verify.compare``)."""
    path = Path(target).expanduser()
    if path.suffix == ".py" or path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
        evidence, source, subject = read_evidence(text, str(path)), text, str(path)
    else:
        async with open_reads(settings) as reads:
            run = await reads.get_run(target)
            node = await reads.node(target, node_id) if node_id is not None else await reads.best(target)
        if node is None:
            raise InvalidInput(f"run {target} has no correct node yet: nothing to verify")
        evidence, source, subject = evidence_of(run, node), node.source, f"run {run.id} node {node.id}"
    fresh = await evaluate_afresh(settings, evidence, source, device)
    return compare(evidence, fresh, tolerance, subject)


async def evaluate_afresh(
    settings: Settings, evidence: Evidence, source: str, device: Device | None
) -> Evaluation:
    """``source`` against the evidence's problem, by an evaluator on an empty cache of its own (under
    the data directory, which no candidate sees; removed afterwards). Only the eager baseline, timed
    side by side; no profile."""
    problem = Problem(name=evidence.problem_name, source=evidence.problem_source)
    try:
        recorded = EvalSettings(**evidence.eval_settings)
    except ValidationError:
        recorded = EvalSettings()
    eval_settings = recorded.model_copy(update={"baselines": ("eager",), "profile": False, "sanitize": False})
    cache = settings.home / f"verify-{secrets.token_hex(4)}"
    fresh = settings.model_copy(update={"cache_dir": cache, "toolchain_dir": settings.toolchain})
    try:
        async with open_evaluator(fresh, eval_settings) as evaluator:
            return await evaluator.evaluate(
                problem, source, device=device or evidence.device, use_cache=False
            )
    finally:
        shutil.rmtree(cache, ignore_errors=True)


async def create_user_problem(
    settings: Settings,
    request: ProblemRequest,
    *,
    device: Device,
    check: bool = True,
    progress: Progress | None = None,
) -> CreatedProblem:
    """``problem new``: the problem file from the user's code, run once by an evaluator of its own
    (the configured one, sandbox included) unless ``check`` is False."""
    if not check:
        return await create_problem(request, None, progress=progress)
    async with open_evaluator(settings) as evaluator:
        return await create_problem(request, evaluator, device=device, progress=progress)
