"""RunService: the application layer over store, tree, evaluator and agents' prompts.

The MCP tools, the CLI and the headless loop all call these methods (the reads come from
``RunReads``, which it extends), so a run behaves the same whoever drives it. Invariant kept
here: every runtime recorded in a tree was measured by this server's evaluator; a client
proposes code, never a result.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from stark_mcp.agents.parsing import split_plan_text
from stark_mcp.agents.render import Prompt, render_prompt
from stark_mcp.agents.templates import PromptTemplates, packaged
from stark_mcp.device import Device
from stark_mcp.evaluator import EvalSettings
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.evaluator.host.executor import Executor
from stark_mcp.evaluator.host.priority import background
from stark_mcp.evaluator.host.worker_results import aggregate, with_baselines
from stark_mcp.memory import MemoryEntry, lesson_of, rank, render_entries
from stark_mcp.orchestrator.errors import BudgetExhausted, InvalidInput, RunError
from stark_mcp.orchestrator.inputs import (
    check_candidate_source,
    check_language,
    check_plan_text,
    check_role,
    language_mismatch,
    resolve_problem,
)
from stark_mcp.orchestrator.own_module import CreatedProblem, create_problem
from stark_mcp.orchestrator.owners import owner_alive, this_process
from stark_mcp.orchestrator.reads import RunReads
from stark_mcp.orchestrator.roots import AllowedRoots
from stark_mcp.orchestrator.tasks import TaskStore
from stark_mcp.problems import Problem
from stark_mcp.progress import Progress
from stark_mcp.records import (
    Action,
    Evaluation,
    Node,
    ProfileReport,
    RunOwner,
    RunRecord,
    ShapeResult,
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
    select_around,
    step_rng,
)
from stark_mcp.tree.anchors import adherence, strip_anchor_lines, validate_plan
from stark_mcp.usercode.request import ProblemRequest

MAX_BUDGET = 10_000
MEMORY_ENTRIES = 3  # lessons of similar problems the plan role reads
PerShape = dict[str, dict[str, TimingStats]]  # baseline name -> shape label -> stats

log = logging.getLogger(__name__)


class RunService(RunReads):
    """Create runs, select, build contexts, evaluate and record attempts (and read, as ``RunReads``)."""

    def __init__(
        self, store: Store, evaluator: Executor, templates: PromptTemplates | None = None, *,
        memory: bool = False,
    ) -> None:
        super().__init__(store)
        self.evaluator = evaluator
        self.templates = templates or packaged()
        # Memory across runs (stark_mcp/memory): a finished run's lesson is kept, and the plan role
        # reads the most similar problems' lessons.
        self.memory = memory
        # Serializes the budget check with the insert for clients of this process (across
        # processes a budget can be overrun by the attempts in flight), and the insert with the
        # filling in of late baselines, so no node misses them.
        self._record_locks: dict[str, asyncio.Lock] = {}
        # Compile baselines timed after create_run returned, one task per run (``_late_baselines``).
        self._baseline_tasks: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()  # reference profiles, shared build files
        self._prepared: set[str] = set()  # devices whose shared build files a task has made
        # One profile of a problem's reference per device and profile settings, shared by the runs
        # of that problem: a second run of it (a benchmark's strategies, a user starting over) reuses
        # it rather than keeping the device busy for as long again.
        self._reference_profiles: dict[tuple[Any, ...], asyncio.Task[ProfileReport]] = {}
        # Profiles of attempts that passed on a GPU, taken once add_child has returned (Nsight
        # Compute costs 6-18 s, more than the rest of a re-evaluation): (run id, node id) -> task.
        # build_context waits for a run's, since the roles read them.
        self._node_profiles: dict[tuple[str, str], asyncio.Task[None]] = {}
        # Attempts being evaluated by add_child, per run: each holds one unit of the budget from
        # the moment it is accepted (so N concurrent submissions on K attempts left evaluate at
        # most K) and steers select_node off the work it duplicates (tree/in_flight.py).
        self._in_flight: dict[str, dict[int, Selection]] = {}
        self._reservations = 0

    def task_store(self) -> TaskStore:
        """The MCP tasks' table in this service's database."""
        return TaskStore(self.store)

    async def budget(self, run_id: str) -> int:
        return (await self.store.get_run(run_id)).budget

    async def extend_budget(self, run_id: str, extra: int) -> RunRecord:
        """Allow ``extra`` more attempts (the user agreed to spend more on this run)."""
        if not 1 <= extra <= MAX_BUDGET:
            raise InvalidInput(f"extra attempts must be between 1 and {MAX_BUDGET}, got {extra}")
        async with self._record_locks.setdefault(run_id, asyncio.Lock()):
            run = await self.store.get_run(run_id)
            if run.budget + extra > MAX_BUDGET:
                raise InvalidInput(f"a budget above {MAX_BUDGET} attempts is refused")
            return await self.store.update_run(run_id, budget=run.budget + extra, status="running")

    def in_flight(self, run_id: str) -> list[Selection]:
        """The attempts of ``run_id`` this process is evaluating for add_child now."""
        return list(self._in_flight.get(run_id, {}).values())

    async def attempts_left(self, run_id: str) -> int:
        """Attempts the budget still allows, those in flight counted as used."""
        return max(0, await super().attempts_left(run_id) - len(self._in_flight.get(run_id, {})))

    async def aclose(self) -> None:
        """Cancel the baselines still being timed; their runs keep them pending, and the next
        process that records an attempt in such a run times them again. Profiles still being
        taken are dropped (``profile_kernel`` takes one on demand)."""
        tasks = [
            *self._baseline_tasks.values(), *self._background, *self._reference_profiles.values(),
            *self._node_profiles.values(),
        ]  # fmt: skip
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._baseline_tasks.clear()
        self._reference_profiles.clear()
        self._node_profiles.clear()

    # ---- runs -------------------------------------------------------------------------------

    async def create_run(
        self,
        problem: str | Problem,
        *,
        device: Device | str = Device.AUTO,
        policy: str | dict[str, Any] = "stark",
        budget: int = 30,
        seed: int | None = None,
        name: str | None = None,
        strategy: str = "mcp",
        eval_settings: EvalSettings | None = None,
        config: dict[str, Any] | None = None,
        progress: Progress | None = None,
        language: str | None = None,
        wait_for_baselines: bool = False,
        roots: AllowedRoots | None = None,
    ) -> tuple[RunRecord, Node]:
        """Check the problem, time its eager baseline and record the run with its root node.

        The other baselines (torch.compile) are timed in the background (``pending_baselines``)
        and fill in every node's speedups when they arrive; ``wait_for_baselines`` times them
        here instead. ``language`` (cuda, triton or cpp) defaults to C++ on the CPU, CUDA on a
        GPU. Progress runs on one scale: the check, the eager baseline, the record. ``roots`` (a
        server's) confine a problem given by path (``roots.py``).
        """
        if not 1 <= budget <= MAX_BUDGET:
            raise InvalidInput(f"budget must be between 1 and {MAX_BUDGET}, got {budget}")
        policy_config = _policy_config(policy)
        if isinstance(problem, Problem):
            loaded = problem
        elif roots is not None and not roots.problem_sources:
            # Problem code runs only in its reference jail; whether that jail walls it off from the
            # server's user depends on the evaluator's isolation level (docs/mcp.md, Problem code).
            isolation = await self.evaluator.isolation()
            loaded = resolve_problem(problem, name, roots, isolation.level, isolation.jails_problems)
        else:
            loaded = resolve_problem(problem, name, roots)
        resolved_device = await self.evaluator.resolve_device(Device.parse(device, error=InvalidInput))
        run_language = check_language(language, resolved_device)
        settings = eval_settings or self.evaluator.settings
        now = ("eager", *settings.baselines) if wait_for_baselines else ("eager",)
        now = tuple(dict.fromkeys(now))
        later = [n for n in settings.baselines if n not in now]
        steps = 3.0

        async def report(done: float, message: str) -> None:
            if progress is not None:
                await progress(done, steps, message)

        async def baseline_progress(done: float, total: float | None, message: str) -> None:
            await report(1.0 + done / max(total or 1.0, 1.0), message)

        await report(0.0, f"checking problem {loaded.name} on {resolved_device}")
        await self.evaluator.check_problem(loaded, device=resolved_device)
        await report(1.0, f"timing the {', '.join(now)} baseline of {loaded.name}")
        per_shape = await self.evaluator.baseline_shapes(
            loaded, device=resolved_device, which=now, progress=baseline_progress
        )
        if "eager" not in per_shape:
            raise RunError(f"the eager baseline of {loaded.name} could not be timed")
        run = await self.store.create_run(
            problem=loaded, device=resolved_device, strategy=strategy,
            policy=policy_config.model_dump(mode="json"), budget=budget,
            seed=seed if seed is not None else secrets.randbelow(2**31), name=name,
            config={
                **(config or {}),
                "eval_settings": settings.model_dump(mode="json"),
                "device_name": await self.evaluator.device_name(resolved_device),
            },
            baselines=_aggregated(per_shape), language=run_language, pending_baselines=later,
            root_evaluation=await self._with_sol(
                loaded, resolved_device, _root_evaluation(loaded, resolved_device, per_shape)
            ),
        )
        self._start_late_baselines(run)
        if resolved_device is Device.CUDA:
            self._start_prepare(resolved_device)
        if resolved_device is Device.CUDA and settings.profile:
            self._start_reference_profile(run, settings)
        await report(steps, f"run {run.id} created" + (
            f"; timing {', '.join(later)} in the background" if later else ""
        ))
        return run, await self.node(run.id, "n0")

    async def create_problem(
        self, request: ProblemRequest, *, device: Device | str = Device.AUTO, check: bool = True,
        progress: Progress | None = None, roots: AllowedRoots | None = None,
    ) -> CreatedProblem:
        """A problem file from the user's own module (see ``own_module``), run once by this evaluator;
        ``roots`` (a server's) confine every path of the request and the write."""
        checker = self.evaluator if check else None
        device = Device.parse(device, error=InvalidInput)
        return await create_problem(request, checker, device=device, progress=progress, roots=roots)

    async def settle_baselines(self, run_id: str) -> RunRecord:
        """Wait until the run's pending baselines are timed (or given up) and filled in."""
        run = await self.store.get_run(run_id)
        task = self._start_late_baselines(run)
        if task is not None:
            await asyncio.shield(task)
        return await self.store.get_run(run_id)

    def _start_late_baselines(self, run: RunRecord) -> asyncio.Task[None] | None:
        """The task timing the run's pending baselines, started if none runs in this process."""
        if not run.pending_baselines:
            return None
        task = self._baseline_tasks.get(run.id)
        if task is None or task.done():
            task = asyncio.create_task(self._late_baselines(run), name=f"baselines-{run.id}")
            self._baseline_tasks[run.id] = task
            task.add_done_callback(lambda t, rid=run.id: self._forget_task(rid, t))
        return task

    def _start_prepare(self, device: Device) -> None:
        """Make the shared build files (a precompiled header: a minute on a fresh machine) while the
        agent writes its first attempt, once per process; the attempt's build takes them when made."""
        if device in self._prepared:
            return
        self._prepared.add(device)

        async def prepare() -> None:
            try:
                await self.evaluator.prepare(device)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the first build makes them instead
                log.warning("preparing the shared build files failed: %s", exc)

        task = asyncio.create_task(prepare(), name=f"prepare-{device}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _start_reference_profile(self, run: RunRecord, settings: EvalSettings) -> None:
        """Profile the reference in the background, kept beside the root node: the first plans
        improve the reference and read where its time goes; create_run does not wait for it. Runs of
        the same problem on the same device share one profile."""

        key = (run.problem.hash, run.device, settings.profile_timeout_s, settings.profile_max_kernels)
        shared = self._reference_profiles.get(key)
        if shared is None or (shared.done() and (shared.cancelled() or shared.exception() is not None)):
            with background():  # the task inherits it: the device's idle time, never an attempt's
                shared = asyncio.create_task(
                    self.evaluator.profile(run.problem, None, device=run.device, settings=settings),
                    name=f"reference-profile-{run.problem.hash[:12]}",
                )
            self._reference_profiles[key] = shared

        async def profile() -> None:
            try:
                report = await asyncio.shield(shared)  # a cancelled run leaves it to the others
                await self.store.add_profile(run.id, "n0", report)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a missing profile never fails the run
                log.warning("profiling the reference of run %s failed: %s", run.id, exc)

        task = asyncio.create_task(profile(), name=f"profile-{run.id}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _profile_later(self, run: RunRecord, node: Node, candidate: Candidate) -> None:
        """Profile a passing attempt (``candidate``: the node's source, parsed already) in the
        background and keep it with its evaluation; the caller already has the verdict. A failed
        profile is logged, never raised: a profile never changes a verdict or a figure."""
        key = (run.id, node.id)

        async def profile() -> None:
            try:
                with background():  # taken while the device is idle: the next attempt never waits
                    report = await self.evaluator.profile(
                        run.problem, candidate, device=run.device, settings=_run_settings(run)
                    )
                await self.store.add_profile(run.id, node.id, report)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.warning("profiling node %s of run %s failed: %s", node.id, run.id, exc)

        task = asyncio.create_task(profile(), name=f"profile-{run.id}-{node.id}")
        self._node_profiles[key] = task
        task.add_done_callback(lambda done: self._node_profiles.pop(key, None))

    async def profiles_ready(self, run_id: str) -> None:
        """Wait for the profiles of ``run_id``'s attempts still being taken (a cancelled caller
        leaves them running)."""
        pending = [task for (run, _node), task in self._node_profiles.items() if run == run_id]
        if pending:
            await asyncio.gather(*(asyncio.shield(task) for task in pending), return_exceptions=True)

    def _forget_task(self, run_id: str, task: asyncio.Task[None]) -> None:
        if self._baseline_tasks.get(run_id) is task:
            del self._baseline_tasks[run_id]

    async def _late_baselines(self, run: RunRecord) -> None:
        """Time the run's pending baselines and fill them in; a failure is recorded on the run
        (``config["baseline_errors"]``, and ``baseline_missing:<name>`` on its nodes), never raised."""
        names = list(run.pending_baselines)
        errors: dict[str, str] = {}
        try:
            with background():  # no attempt's evaluation waits behind them (evaluator/host/priority.py)
                late = await self.evaluator.baseline_shapes(run.problem, device=run.device, which=names)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded on the run, never raised into a caller
            log.warning("baselines %s of run %s failed: %s", names, run.id, exc)
            late, errors = {}, {name: f"{type(exc).__name__}: {exc}"[:2000] for name in names}
        for name in names:
            if name not in late and name not in errors:
                errors[name] = "could not be timed (see the evaluator's baseline cache entry)"
        async with self._record_locks.setdefault(run.id, asyncio.Lock()):
            root = await self.node(run.id, "n0")
            known = _root_shapes(root)
            merged = {**known, **late}
            await self.store.fill_baselines(
                run.id, _aggregated(late),
                lambda evaluation: _settle(evaluation, late, errors),
                done=names, errors=errors,
                root_evaluation=(
                    _root_evaluation(run.problem, run.device, merged).model_copy(
                        update={"sol": root.evaluation.sol if root.evaluation else None}
                    )
                    if merged
                    else None
                ),
            )

    async def _with_sol(self, problem: Problem, device: Device, root: Evaluation) -> Evaluation:
        """The reference's own place against the floor (docs/sol.md); none when it has no floor."""
        try:
            sol = await self.evaluator.sol_of(problem, root, device=device)
        except Exception as exc:  # noqa: BLE001 - the floor is information: a run starts without it
            log.warning("no floor for %s: %s", problem.name, exc)
            return root
        return root.model_copy(update={"sol": sol})

    # ---- search -----------------------------------------------------------------------------

    async def select_node(self, run_id: str, *, step: int | None = None) -> Selection:
        """Apply the run's policy. ``step`` defaults to the attempts recorded so far, so the
        same tree and seed always give the same choice (and a resumed run replays it)."""
        run = await self.store.get_run(run_id)
        tree = await self.tree(run_id)
        attempts = len(tree) - 1
        if attempts >= run.budget:
            raise BudgetExhausted(f"run {run_id} has used its budget of {run.budget} attempts")
        pending = self.in_flight(run_id)
        if attempts + len(pending) >= run.budget:
            raise BudgetExhausted(
                f"run {run_id}: the {run.budget - attempts} attempts left of its budget of {run.budget} "
                "are all being evaluated; wait for one of them to finish"
            )
        # Attempts in flight shift the step, so a second pick on the same tree draws afresh.
        at = attempts + len(pending) if step is None else step
        return select_around(tree, PolicyConfig(**run.policy), run.seed, at, pending)

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
        await self.profiles_ready(run_id)  # the windows show each attempt's kernels
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
        similar = None
        if role == "plan" and self.memory:
            relevant = rank(await self.memories(), run.problem.source, MEMORY_ENTRIES, exclude_run=run_id)
            similar = render_entries(relevant) or None
        return render_prompt(
            role, problem=run.problem, tree=tree, node_id=node_id, window_ids=window_ids,
            device=run.device, plan=plan, focus=focus, templates=self.templates, anchored=anchored,
            language=run.language, memories=similar,
        )

    # ---- evaluation and recording ------------------------------------------------------------

    async def evaluate(self, run_id: str, source: str | Candidate, *,
        progress: Progress | None = None) -> StoredEvaluation:
        """Evaluate a source for this run without recording a node. No profile: it would delay the
        verdict (Nsight Compute, 5-9 s), and evaluate_kernel's answer has none; add_child profiles the
        attempt it records, in the background."""
        candidate = _clean_candidate(source)
        check_candidate_source(candidate)
        run = await self.store.get_run(run_id)
        self._start_late_baselines(run)
        evaluation = await self._evaluate(run, candidate, progress, profile=False)
        async with self._record_locks.setdefault(run_id, asyncio.Lock()):
            evaluation = await self._with_known_baselines(run_id, evaluation)
            return await self.store.save_evaluation(run_id, candidate.hash, evaluation)

    async def add_child(
        self,
        run_id: str,
        parent_id: str,
        source: str | Candidate,
        *,
        plan: str | None = None,
        action: str = "plan",
        evaluation_id: str | None = None,
        usage: Usage | None = None,
        exchange_ids: Sequence[int] = (),
        progress: Progress | None = None,
        owner: RunOwner | None = None,
    ) -> Node:
        """Record an attempt under ``parent_id`` with the server's own evaluation of it.

        The run's status follows: ``running`` from its first attempt, ``finished`` at its budget;
        a run that starts running here is claimed by ``owner`` (default: this process).
        """
        if action not in (Action.PLAN.value, Action.DEBUG.value):
            raise InvalidInput(f"action must be 'plan' or 'debug', got {action!r}")
        candidate = _clean_candidate(source)
        check_candidate_source(candidate)
        check_plan_text(plan)
        run = await self.store.get_run(run_id)
        parent = await self.node(run_id, parent_id)
        await self._require_budget(run)
        self._start_late_baselines(run)
        if action == Action.DEBUG.value and plan is None:
            plan = parent.plan  # Algorithm 1: a debug child keeps its parent's plan and anchors
        in_spans = _adherence(plan, parent, candidate.source) if action == Action.PLAN.value else None
        lock = self._record_locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            await self._require_budget(run, in_flight=True)
            token = self._reserve(run_id, parent_id, action)
        try:
            evaluation = await self._reuse_or_evaluate(run, candidate, evaluation_id, progress, profile=False)
            async with lock:
                await self._require_budget(run)
                evaluation = await self._with_known_baselines(run_id, evaluation)
                node = await self.store.add_node(
                    run_id, parent_id=parent_id, action=Action(action), source=candidate.source, plan=plan,
                    evaluation=evaluation, usage=usage, adherence=in_spans,
                )
                self._release(run_id, token)  # recorded: the attempt now counts as a node
        finally:
            self._release(run_id, token)  # refused, failed or cancelled: the unit goes back
        if exchange_ids:
            await self.store.attach_exchanges(run_id, list(exchange_ids), node.id)
        if _profiles_passing(run, self.evaluator.settings, node.evaluation):
            self._profile_later(run, node, candidate)
        status = "finished" if await self.attempts(run_id) >= run.budget else "running"
        if run.status != status:
            if status == "running":
                await self.mark_running(run_id, owner)
            else:
                await self.store.update_run(run_id, status=status)
            if status == "finished" and self.memory:
                await self.remember(run_id)
        return node

    # ---- who drives a running run (owners.py) ----------------------------------------------

    async def mark_running(self, run_id: str, owner: RunOwner | None = None) -> None:
        """Claim the run for ``owner`` (default: this process), then mark it running."""
        await self.store.claim_run(run_id, owner or this_process())
        await self.store.update_run(run_id, status="running")

    async def interrupt_orphaned_runs(self) -> list[str]:
        """Mark 'interrupted' every running run whose owner is gone (a process that died, a session
        of this process that closed) or that nobody claimed (left by an older stark-mcp); a run of a
        live owner, or of another host's process, is left alone. Returns the runs marked."""
        marked = []
        for run_id, owner in await self.store.running_owners():
            if owner is not None and owner_alive(owner) is not False:
                continue
            if await self.store.interrupt_owned(run_id, owner):
                marked.append(run_id)
        if marked:
            log.warning("marked interrupted, their driver gone: %s", ", ".join(marked))
        return marked

    async def release_session(self, owner: RunOwner) -> list[str]:
        """A closed session's running runs, marked 'interrupted' (a later claimant keeps its own)."""
        marked = []
        for run_id, current in await self.store.running_owners():
            if current == owner and await self.store.interrupt_owned(run_id, owner):
                marked.append(run_id)
        return marked

    # ---- memory across runs -------------------------------------------------------------------

    async def remember(self, run_id: str) -> MemoryEntry | None:
        """Keep what ``run_id`` learned (replacing an earlier entry of it); None without attempts."""
        run = await self.store.get_run(run_id)
        entry = lesson_of(run, await self.store.nodes(run_id), time.time())
        if entry is not None:
            await self.store.save_memory(
                run_id, entry.problem_hash, entry.model_dump_json(), entry.created_at
            )
        return entry

    async def clear_memory(self) -> int:
        """Forget every run's lesson; returns how many there were."""
        return await self.store.clear_memory()

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

    async def _require_budget(self, run: RunRecord, *, in_flight: bool = False) -> None:
        """Refuse an attempt beyond the budget; ``in_flight`` counts the attempts being evaluated."""
        recorded = await self.attempts(run.id)
        pending = len(self._in_flight.get(run.id, {})) if in_flight else 0
        if recorded >= run.budget:
            raise BudgetExhausted(
                f"run {run.id} has used its budget of {run.budget} attempts; read the leaderboard "
                "and export the best kernel, or start a new run"
            )
        if recorded + pending >= run.budget:
            raise BudgetExhausted(
                f"run {run.id} has used its budget of {run.budget} attempts: {recorded} recorded and "
                f"{pending} being evaluated now; wait for those to finish"
            )

    def _reserve(self, run_id: str, parent_id: str, action: str) -> int:
        self._reservations += 1
        self._in_flight.setdefault(run_id, {})[self._reservations] = Selection(
            node_id=parent_id, action="debug" if action == Action.DEBUG.value else "plan",
            reason="an add_child being evaluated",
        )
        return self._reservations

    def _release(self, run_id: str, token: int) -> None:
        held = self._in_flight.get(run_id)
        if held is not None:
            held.pop(token, None)
            if not held:
                del self._in_flight[run_id]

    async def _reuse_or_evaluate(
        self,
        run: RunRecord,
        candidate: Candidate,
        evaluation_id: str | None,
        progress: Progress | None,
        profile: bool = True,
    ) -> Evaluation:
        if evaluation_id:
            stored = await self.store.get_evaluation(evaluation_id)
            if stored.run_id == run.id and stored.source_hash == candidate.hash:
                return stored.evaluation
        return await self._evaluate(run, candidate, progress, profile=profile)

    async def evaluation_slots(self, device: Device | str = Device.AUTO) -> int:
        """How many evaluations this process runs at once on ``device`` (its GPUs, or Ray actors)."""
        return await self.evaluator.slots(device)

    async def _evaluate(
        self, run: RunRecord, candidate: Candidate, progress: Progress | None, profile: bool = True
    ) -> Evaluation:
        """``profile=False``: no profile after a passing verdict (add_child takes it afterwards)."""
        # The run's speedups are against baselines timed on its model: never mix models in one run.
        recorded = run.config.get("device_name")
        if recorded:
            here = await self.evaluator.device_name(run.device)
            if here != recorded:
                raise RunError(
                    f"run {run.id} was timed on {recorded} but this process evaluates on {here}; a run "
                    f"never mixes GPU models: continue it where a {recorded} is (--gpus), or start a new run"
                )
        mismatch = language_mismatch(run.language, candidate)
        if mismatch is not None:
            return Evaluation(
                status=Status.REJECTED, reason="language", message=mismatch, device=run.device,
                problem_hash=run.problem.hash, source_hash=candidate.hash,
            )
        settings = _run_settings(run)
        if not profile:
            settings = (settings or self.evaluator.settings).model_copy(update={"profile": False})
        return await self.evaluator.evaluate(
            run.problem, candidate, device=run.device, settings=settings, progress=progress,
            wait_for_baselines=False,
        )

    async def _with_known_baselines(self, run_id: str, evaluation: Evaluation) -> Evaluation:
        """Add the baselines the run already has (on its root, per shape) that the evaluation
        lacks; called under the run's record lock, so a late baseline either is found here or
        finds the new node when it is filled in."""
        if not any(flag.startswith("baseline_pending:") for flag in evaluation.flags):
            return evaluation
        known = _root_shapes(await self.node(run_id, "n0"))
        run = await self.store.get_run(run_id)
        given_up = set(run.config.get("baseline_errors", {})) - set(run.pending_baselines)
        return _settle(evaluation, known, given_up) or evaluation


def _clean_candidate(source: str | Candidate) -> Candidate:
    """The candidate to evaluate and record, made once for the whole call (``Candidate``): without
    anchor markers a code agent left behind, which would break the next plan's BEGIN/END pairing. A
    Candidate given without any is used as it is, its parse and checks with it."""
    text = source.source if isinstance(source, Candidate) else source
    cleaned = strip_anchor_lines(text)
    return source if isinstance(source, Candidate) and cleaned == text else Candidate(cleaned)


def _policy_config(policy: str | dict[str, Any]) -> PolicyConfig:
    try:
        return PolicyConfig(name=policy) if isinstance(policy, str) else PolicyConfig(**policy)
    except ValidationError as exc:
        raise InvalidInput(f"invalid policy {policy!r}: {exc.errors()[0]['msg']}") from None


def _run_settings(run: RunRecord) -> EvalSettings | None:
    stored = run.config.get("eval_settings")
    return EvalSettings(**stored) if stored else None


def _profiles_passing(run: RunRecord, default: EvalSettings, evaluation: Evaluation | None) -> bool:
    """Whether a recorded attempt gets a profile taken after it: it passed on a GPU, profiles are on
    for the run, and it has none (an evaluation reused from ``evaluate_kernel`` may have one)."""
    settings = _run_settings(run) or default
    return (
        settings.profile
        and evaluation is not None
        and evaluation.passed
        and evaluation.device == "cuda"
        and evaluation.profile is None
    )


def _aggregated(per_shape: PerShape) -> dict[str, TimingStats]:
    return {name: aggregate(list(shapes.values())) for name, shapes in per_shape.items() if shapes}


def _root_evaluation(problem: Problem, device: Device, per_shape: PerShape) -> Evaluation:
    """The reference timed as the eager baseline. Its ``shapes`` keep every baseline per shape:
    the one place the run holds what a late evaluation needs to compute its speedups."""
    shapes = []
    for label, eager in per_shape["eager"].items():
        baselines = {name: s[label] for name, s in per_shape.items() if label in s}
        speedups = {name: stats.median_ms / eager.median_ms for name, stats in baselines.items()}
        shapes.append(ShapeResult(label=label, runtime=eager, baselines=baselines, speedups=speedups))
    baselines = _aggregated(per_shape)
    eager = baselines["eager"]
    return Evaluation(
        status=Status.PASSED, message="the reference module, timed as the eager baseline",
        runtime=eager, baselines=baselines,
        speedups={name: stats.median_ms / eager.median_ms for name, stats in baselines.items()},
        device=device, problem_hash=problem.hash, source_hash=problem.hash, shapes=shapes,
    )


def _root_shapes(root: Node) -> PerShape:
    """Every baseline the run has, per shape, from its root's evaluation."""
    found: PerShape = {}
    for shape in root.evaluation.shapes if root.evaluation is not None else ():
        for name, stats in shape.baselines.items():
            found.setdefault(name, {})[shape.label] = stats
    return found


def _settle(evaluation: Evaluation, late: PerShape, given_up: set[str] | dict[str, str]) -> Evaluation | None:
    """``evaluation`` with the late baselines' speedups, and ``baseline_pending:<name>`` turned
    into ``baseline_missing:<name>`` for those given up; None when nothing changes."""
    filled = with_baselines(evaluation, late) or evaluation
    flags = [
        f"baseline_missing:{flag.split(':', 1)[1]}"
        if flag.startswith("baseline_pending:") and flag.split(":", 1)[1] in given_up
        else flag
        for flag in filled.flags
    ]
    if flags != filled.flags:
        filled = filled.model_copy(update={"flags": flags})
    return None if filled is evaluation else filled


def _adherence(plan: str | None, parent: Node, source: str) -> float | None:
    if not plan or BEGIN_MARK not in plan:  # no plan, or an advice-only plan (no-anchors ablation)
        return None
    _advice, scaffold = split_plan_text(plan)
    return adherence(validate_plan(scaffold, parent.source), source)
