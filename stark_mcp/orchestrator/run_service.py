"""RunService: the application layer over store, tree, evaluator and agents' prompts.

The MCP tools, the CLI and the headless loop all call these methods (the reads come from
``RunReads``, which it extends), so a run behaves the same whoever drives it. Invariant kept
here: every runtime recorded in a tree was measured by this server's evaluator; a client
proposes code, never a result.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from stark_mcp.agents.parsing import split_plan_text
from stark_mcp.agents.render import Prompt, render_prompt
from stark_mcp.agents.templates import PromptTemplates, packaged
from stark_mcp.evaluator import EvalSettings
from stark_mcp.evaluator.executor import Executor
from stark_mcp.orchestrator.errors import BudgetExhausted, InvalidInput, RunError
from stark_mcp.orchestrator.inputs import (
    check_candidate_source,
    check_plan_text,
    check_role,
    resolve_problem,
)
from stark_mcp.orchestrator.own_module import CreatedProblem, create_problem
from stark_mcp.orchestrator.reads import RunReads
from stark_mcp.problems import Problem, source_hash
from stark_mcp.progress import Progress
from stark_mcp.records import (
    Action,
    Evaluation,
    Node,
    ProfileReport,
    RunRecord,
    Status,
    StoredEvaluation,
    TimingStats,
    Usage,
)
from stark_mcp.store import Store
from stark_mcp.tree import (
    BEGIN_MARK,
    PolicyConfig,
    Selection,
    context_window,
    recent_window,
    select,
    step_rng,
)
from stark_mcp.tree.anchors import adherence, strip_anchor_lines, validate_plan
from stark_mcp.usercode.request import ProblemRequest

MAX_BUDGET = 10_000


class RunService(RunReads):
    """Create runs, select, build contexts, evaluate and record attempts (and read, as ``RunReads``)."""

    def __init__(self, store: Store, evaluator: Executor, templates: PromptTemplates | None = None) -> None:
        super().__init__(store)
        self.evaluator = evaluator
        self.templates = templates or packaged()
        # Serializes the budget check with the insert for clients of this process;
        # across processes a budget can be overrun by the attempts in flight.
        self._record_locks: dict[str, asyncio.Lock] = {}

    # ---- runs -------------------------------------------------------------------------------

    async def create_run(
        self,
        problem: str | Problem,
        *,
        device: str = "auto",
        policy: str | dict[str, Any] = "stark",
        budget: int = 30,
        seed: int | None = None,
        name: str | None = None,
        strategy: str = "mcp",
        eval_settings: EvalSettings | None = None,
        config: dict[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> tuple[RunRecord, Node]:
        """Check the problem, time its baselines and record the run with its root node.

        Progress runs on one scale: the check, one step per baseline, the record.
        """
        if not 1 <= budget <= MAX_BUDGET:
            raise InvalidInput(f"budget must be between 1 and {MAX_BUDGET}, got {budget}")
        policy_config = _policy_config(policy)
        loaded = problem if isinstance(problem, Problem) else resolve_problem(problem, name)
        resolved_device = await self.evaluator.resolve_device(device)
        settings = eval_settings or self.evaluator.settings
        profiling = resolved_device == "cuda" and settings.profile
        steps = float(len(settings.baselines) + 2 + profiling)

        async def report(done: float, message: str) -> None:
            if progress is not None:
                await progress(done, steps, message)

        async def baseline_progress(done: float, _total: float | None, message: str) -> None:
            await report(1.0 + done, message)

        await report(0.0, f"checking problem {loaded.name} on {resolved_device}")
        await self.evaluator.check_problem(loaded, device=resolved_device)
        await report(1.0, f"timing the baselines of {loaded.name}: {', '.join(settings.baselines)}")
        baselines = await self.evaluator.baselines(
            loaded, device=resolved_device, which=settings.baselines, progress=baseline_progress
        )
        if "eager" not in baselines:
            raise RunError(f"the eager baseline of {loaded.name} could not be timed")
        root_evaluation = _root_evaluation(loaded, resolved_device, baselines)
        if profiling:
            # The first plans improve the reference: they see where its time goes.
            await report(steps - 1, f"profiling the reference of {loaded.name}")
            profile = await self.evaluator.profile(loaded, None, device=resolved_device, settings=settings)
            root_evaluation = root_evaluation.model_copy(update={"profile": profile})
        run = await self.store.create_run(
            problem=loaded, device=resolved_device, strategy=strategy,
            policy=policy_config.model_dump(mode="json"), budget=budget,
            seed=seed if seed is not None else secrets.randbelow(2**31), name=name,
            config={
                **(config or {}),
                "eval_settings": settings.model_dump(mode="json"),
                "device_name": await self.evaluator.device_name(resolved_device),
            },
            baselines=baselines, root_evaluation=root_evaluation,
        )
        await report(steps, f"run {run.id} created")
        return run, await self.node(run.id, "n0")

    async def create_problem(
        self, request: ProblemRequest, *, device: str = "auto", check: bool = True,
        progress: Progress | None = None,
    ) -> CreatedProblem:
        """A problem file from the user's own module (see ``own_module``), run once by this evaluator."""
        checker = self.evaluator if check else None
        return await create_problem(request, checker, device=device, progress=progress)

    # ---- search -----------------------------------------------------------------------------

    async def select_node(self, run_id: str, *, step: int | None = None) -> Selection:
        """Apply the run's policy. ``step`` defaults to the attempts recorded so far, so the
        same tree and seed always give the same choice (and a resumed run replays it)."""
        run = await self.store.get_run(run_id)
        tree = await self.tree(run_id)
        attempts = len(tree) - 1
        if attempts >= run.budget:
            raise BudgetExhausted(f"run {run_id} has used its budget of {run.budget} attempts")
        return select(tree, PolicyConfig(**run.policy),
            step_rng(run.seed, attempts if step is None else step))

    async def build_context(
        self, run_id: str, node_id: str, role: str, plan: str | None = None,
        *, step: int | None = None, focus: str | None = None, window: str = "roles", anchored: bool = True,
    ) -> Prompt:
        """The full prompt for ``role`` at ``node_id`` from that role's context window.

        The ablations (``orchestrator/strategies.py``) pass ``window="recent"`` (the same fixed
        window for every role) or ``anchored=False`` (plans are advice without a scaffold).
        """
        check_role(role)
        check_plan_text(plan)
        run = await self.store.get_run(run_id)
        tree = await self.tree(run_id)
        node = tree.get(node_id)
        if role == "code":
            if not plan:
                raise InvalidInput(
                    "role 'code' needs the plan: pass the plan agent's reply (advice plus the "
                    "anchored scaffold of the node's source)"
                )
            if anchored:
                _advice, scaffold = split_plan_text(plan)
                validate_plan(scaffold, node.source)
        config = PolicyConfig(**run.policy)
        if window == "recent":
            window_ids = recent_window(tree, node_id, cap=config.window_cap)
        else:
            window_role = role if role != "generalist" else ("debug" if node.has_bug else "plan")
            window_ids = context_window(
                tree, node_id, window_role, step_rng(run.seed, len(tree) - 1 if step is None else step),
                top_r=config.top_r, cap=config.window_cap,
            )
        return render_prompt(
            role, problem=run.problem, tree=tree, node_id=node_id, window_ids=window_ids,
            device=run.device, plan=plan, focus=focus, templates=self.templates, anchored=anchored,
        )

    # ---- evaluation and recording ------------------------------------------------------------

    async def evaluate(self, run_id: str, source: str, *,
        progress: Progress | None = None) -> StoredEvaluation:
        """Evaluate a source for this run without recording a node."""
        source = _clean_source(source)
        check_candidate_source(source)
        run = await self.store.get_run(run_id)
        evaluation = await self._evaluate(run, source, progress)
        return await self.store.save_evaluation(run_id, source_hash(source), evaluation)

    async def add_child(
        self,
        run_id: str,
        parent_id: str,
        source: str,
        *,
        plan: str | None = None,
        action: str = "plan",
        evaluation_id: str | None = None,
        usage: Usage | None = None,
        exchange_ids: Sequence[int] = (),
        progress: Progress | None = None,
    ) -> Node:
        """Record an attempt under ``parent_id`` with the server's own evaluation of it.

        The run's status follows: ``running`` from its first attempt, ``finished`` at its budget.
        """
        if action not in (Action.PLAN.value, Action.DEBUG.value):
            raise InvalidInput(f"action must be 'plan' or 'debug', got {action!r}")
        source = _clean_source(source)
        check_candidate_source(source)
        check_plan_text(plan)
        run = await self.store.get_run(run_id)
        parent = await self.node(run_id, parent_id)
        await self._require_budget(run)
        if action == Action.DEBUG.value and plan is None:
            plan = parent.plan  # Algorithm 1: a debug child keeps its parent's plan and anchors
        in_spans = _adherence(plan, parent, source) if action == Action.PLAN.value else None
        evaluation = await self._reuse_or_evaluate(run, source, evaluation_id, progress)
        async with self._record_locks.setdefault(run_id, asyncio.Lock()):
            await self._require_budget(run)
            node = await self.store.add_node(
                run_id, parent_id=parent_id, action=Action(action), source=source, plan=plan,
                evaluation=evaluation, usage=usage, adherence=in_spans,
            )
        if exchange_ids:
            await self.store.attach_exchanges(run_id, list(exchange_ids), node.id)
        status = "finished" if await self.attempts(run_id) >= run.budget else "running"
        if run.status != status:
            await self.store.update_run(run_id, status=status)
        return node

    async def profile_node(
        self, run_id: str, node_id: str, *, progress: Progress | None = None
    ) -> ProfileReport:
        """Profile a node's source now (the root: the reference) and keep the profile with its
        evaluation. A failed profile never replaces one that has kernels."""
        run = await self.store.get_run(run_id)
        node = await self.node(run_id, node_id)
        if node.evaluation is None:
            raise InvalidInput(f"node {node_id} of run {run_id} has not been evaluated: nothing to profile")
        source = None if node.action is Action.ROOT else node.source
        report = await self.evaluator.profile(
            run.problem, source, device=run.device, settings=_run_settings(run), progress=progress
        )
        await self.store.add_profile(run_id, node_id, report)
        return report

    # ---- helpers ----------------------------------------------------------------------------

    async def _require_budget(self, run: RunRecord) -> None:
        if await self.attempts(run.id) >= run.budget:
            raise BudgetExhausted(
                f"run {run.id} has used its budget of {run.budget} attempts; read the leaderboard "
                "and export the best kernel, or start a new run"
            )

    async def _reuse_or_evaluate(
        self, run: RunRecord, source: str, evaluation_id: str | None, progress: Progress | None
    ) -> Evaluation:
        if evaluation_id:
            stored = await self.store.get_evaluation(evaluation_id)
            if stored.run_id == run.id and stored.source_hash == source_hash(source):
                return stored.evaluation
        return await self._evaluate(run, source, progress)

    async def evaluation_slots(self, device: str = "auto") -> int:
        """How many evaluations this process runs at once on ``device`` (its GPUs, or Ray actors)."""
        return await self.evaluator.slots(device)

    async def _evaluate(self, run: RunRecord, source: str, progress: Progress | None) -> Evaluation:
        # The run's speedups are against baselines timed on its model: never mix models in one run.
        recorded = run.config.get("device_name")
        if recorded:
            here = await self.evaluator.device_name(run.device)
            if here != recorded:
                raise RunError(
                    f"run {run.id} was timed on {recorded} but this process evaluates on {here}; a run "
                    f"never mixes GPU models: continue it where a {recorded} is (--gpus), or start a new run"
                )
        return await self.evaluator.evaluate(
            run.problem, source, device=run.device, settings=_run_settings(run), progress=progress
        )


def _clean_source(source: str) -> str:
    """Anchor markers a code agent left behind would break the next plan's BEGIN/END pairing."""
    return strip_anchor_lines(source)


def _policy_config(policy: str | dict[str, Any]) -> PolicyConfig:
    try:
        return PolicyConfig(name=policy) if isinstance(policy, str) else PolicyConfig(**policy)
    except ValidationError as exc:
        raise InvalidInput(f"invalid policy {policy!r}: {exc.errors()[0]['msg']}") from None


def _run_settings(run: RunRecord) -> EvalSettings | None:
    stored = run.config.get("eval_settings")
    return EvalSettings(**stored) if stored else None


def _root_evaluation(problem: Problem, device: str, baselines: dict[str, TimingStats]) -> Evaluation:
    eager = baselines["eager"]
    return Evaluation(
        status=Status.PASSED, message="the reference module, timed as the eager baseline",
        runtime=eager, baselines=baselines,
        speedups={name: stats.median_ms / eager.median_ms for name, stats in baselines.items()},
        device=device, problem_hash=problem.hash, source_hash=problem.hash,
    )


def _adherence(plan: str | None, parent: Node, source: str) -> float | None:
    if not plan or BEGIN_MARK not in plan:  # no plan, or an advice-only plan (no-anchors ablation)
        return None
    _advice, scaffold = split_plan_text(plan)
    return adherence(validate_plan(scaffold, parent.source), source)
