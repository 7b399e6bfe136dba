"""The headless search (the paper's Algorithm 1) over ``RunService``, with K expansions in flight.

Each attempt: select a node with the run's policy (step t uses ``step_rng(seed, t)``), expand it
with the strategy's agents, evaluate the candidate, record it as a child (``RunService.add_child``),
and update the best. K workers share one step counter, so LLM calls of one attempt overlap the
builds and timing of others. The budget counts recorded attempts only: a resumed run continues
from what the store holds, and an expansion that produced no source does not use up budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.llm import LLMBackend
from stark_mcp.orchestrator.errors import BudgetExhausted, ExpansionFailed, InvalidInput
from stark_mcp.orchestrator.events import FailedExpansion, SearchEvent, SearchProgress, SearchSummary
from stark_mcp.orchestrator.expansion import expand
from stark_mcp.orchestrator.limits import Limits, StopReason, limit_reached, sol_reached
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.strategies import DEFAULT_STRATEGY, STRATEGIES, Strategy, get_strategy
from stark_mcp.orchestrator.summary import eager_speedup, summarize_run
from stark_mcp.records import ExchangeRecord, Node, RunOwner, RunRecord, Usage
from stark_mcp.tree import PolicyConfig, Selection, leaderboard, select_around

# Extra draws when a selection would duplicate work already in flight (parallel runs only).


def strategy_for(run: RunRecord, requested: str | None) -> Strategy:
    """The strategy to drive ``run`` with; its policy must be the one the run records.

    A run created over MCP (strategy ``mcp``, any policy) is driven STARK's way: role agents
    with their context windows, under whatever policy the run records.
    """
    recorded = run.policy.get("name")
    if requested is None and run.strategy not in STRATEGIES:
        base = STRATEGIES[DEFAULT_STRATEGY]
        return base.model_copy(update={"name": run.strategy, "policy": recorded})
    name = requested or run.strategy
    strategy = get_strategy(name)
    if recorded != strategy.policy:
        raise InvalidInput(
            f"run {run.id} was created with policy {recorded!r}; strategy {name!r} needs policy "
            f"{strategy.policy!r}. Use a strategy with the run's policy or start a new run"
        )
    return strategy


async def run_search(
    service: RunService,
    run_id: str,
    backend: LLMBackend,
    *,
    budget: int | None = None,
    strategy: str | None = None,
    parallel: int = 1,
    limits: Limits | None = None,
    progress: SearchProgress | None = None,
    owner: RunOwner | None = None,
) -> SearchSummary:
    """Expand the run's tree until its budget or a limit is reached (the run claimed by ``owner``,
    default this process, while it runs).

    ``budget``: attempts this call may record (default: all the run's budget has left).
    ``strategy``: default the run's own (``stark`` for runs created over MCP).
    Cancelling the caller cancels the attempts in flight, marks the run ``interrupted`` and
    re-raises; everything recorded stays, and calling again resumes.
    """
    if parallel < 1:
        raise InvalidInput(f"parallel must be at least 1, got {parallel}")
    if budget is not None and budget < 1:
        raise InvalidInput(f"budget must be at least 1, got {budget}")
    run = await service.get_run(run_id)
    search = _Search(service, run, strategy_for(run, strategy), backend, limits or Limits(), progress)
    search.owner = owner
    return await search.run(budget, parallel)


class _Search:
    def __init__(
        self, service: RunService, run: RunRecord, strategy: Strategy, backend: LLMBackend,
        limits: Limits, progress: SearchProgress | None,
    ) -> None:
        self.service = service
        self.run_record = run
        self.strategy = strategy
        self.backend = backend
        self.limits = limits
        self.progress = progress
        self.owner: RunOwner | None = None
        self.config = PolicyConfig(**run.policy)
        self.cond = asyncio.Condition()
        self.in_flight: dict[int, Selection | None] = {}
        self.failed: list[FailedExpansion] = []
        self.stop: StopReason | None = None
        self.stop_message: str | None = None
        self.recorded = 0  # attempts in the run
        self.new_attempts = 0
        self.consecutive_failures = 0
        self.usage = Usage()
        self.best: Node | None = None
        self.started = time.monotonic()
        self.target = 0
        self.target_reason: StopReason = "budget"
        self.next_step = 0

    # ---- the whole call ------------------------------------------------------------------

    async def run(self, budget: int | None, parallel: int) -> SearchSummary:
        run_id = self.run_record.id
        tree = await self.service.tree(run_id)
        self.recorded = len(tree) - 1
        self.next_step = self.recorded
        self.target = self.run_record.budget
        if budget is not None and self.recorded + budget < self.target:
            self.target = self.recorded + budget
        if self.limits.max_attempts is not None and self.recorded + self.limits.max_attempts < self.target:
            self.target, self.target_reason = self.recorded + self.limits.max_attempts, "max_attempts"
        top = leaderboard(tree, 1)
        self.best = top[0] if top else None
        self._check_sol()  # a resumed run already at its stop rule makes no attempt
        self.usage = await self.service.usage(run_id)
        await self.service.mark_running(run_id, self.owner)
        await self._emit("started", message=f"{self.strategy.name}: {self.strategy.description}")
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(parallel):
                    group.create_task(self._worker())
        except BaseException as exc:
            await asyncio.shield(self._after_error(exc))
            raise _single(exc) from None
        stop = self.stop or "budget"
        # The summary reports speedups over every baseline: wait for those still being timed.
        await self.service.settle_baselines(run_id)
        status = "finished" if self.recorded >= self.run_record.budget else "interrupted"
        await self.service.store.update_run(run_id, status=status)
        await self._emit("finished" if status == "finished" else "stopped", stop_reason=stop,
                         message=self.stop_message or "")
        return await summarize_run(
            self.service, run_id, stop_reason=stop, new_attempts=self.new_attempts,
            wall_s=time.monotonic() - self.started, failed=self.failed, message=self.stop_message,
        )

    async def _after_error(self, exc: BaseException) -> None:
        interrupted = isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt))
        await self.service.store.update_run(
            self.run_record.id, status="interrupted" if interrupted else "failed"
        )
        message = "interrupted" if interrupted else f"stopped by an error: {_single(exc)!r}"
        with contextlib.suppress(Exception):  # a broken progress sink must not hide the real error
            await self._emit("stopped", stop_reason="interrupted" if interrupted else None, message=message)

    # ---- workers -------------------------------------------------------------------------

    async def _worker(self) -> None:
        while (step := await self._claim()) is not None:
            try:
                await self._attempt(step)
            finally:
                async with self.cond:
                    del self.in_flight[step]
                    self.cond.notify_all()

    async def _claim(self) -> int | None:
        """The next step to run, waiting while the attempts left are all in flight; None to stop."""
        async with self.cond:
            while True:
                if self.stop is None and self.recorded >= self.target:
                    self.stop = self.target_reason
                if self.stop is None:
                    self.stop = limit_reached(
                        self.limits.model_copy(update={"max_attempts": None}),
                        recorded=self.new_attempts, elapsed_s=time.monotonic() - self.started,
                        cost_usd=self.usage.cost_usd, consecutive_failures=self.consecutive_failures,
                    )
                if self.stop is not None:
                    self.cond.notify_all()
                    return None
                if self.recorded + len(self.in_flight) < self.target:
                    step = self.next_step
                    self.next_step += 1
                    self.in_flight[step] = None
                    return step
                await self.cond.wait()

    async def _attempt(self, step: int) -> None:
        run_id = self.run_record.id
        selection = await self._select(step)
        await self._emit("selected", step=step, node_id=selection.node_id, action=selection.action,
                         message=selection.reason)
        proposal = None
        try:
            proposal = await expand(
                self.service, self.run_record, self.strategy, self.backend, selection, step,
                on_exchange=lambda record: self._on_exchange(record, selection, step),
            )
            candidate = Candidate(proposal.source)  # one parse and check for both calls
            stored = await self.service.evaluate(run_id, candidate)
            await self._emit("evaluated", step=step, parent_id=selection.node_id, action=selection.action,
                             verdict=_verdict(stored.evaluation.status.value, stored.evaluation.reason))
            node = await self.service.add_child(
                run_id, selection.node_id, candidate, plan=proposal.plan, action=proposal.action,
                evaluation_id=stored.id, usage=proposal.usage, exchange_ids=proposal.exchange_ids,
            )
        except ExpansionFailed as exc:
            await self._failed(step, selection, str(exc), exc.exchange_ids, fatal=exc.fatal)
            return
        except BudgetExhausted as exc:
            # Another client of this run (an MCP host) used the last attempts; nothing here is lost.
            async with self.cond:
                self.stop, self.stop_message = "budget", str(exc)
                self.cond.notify_all()
            return
        except InvalidInput as exc:  # the agents' source is unusable as a candidate (e.g. too large)
            ids = proposal.exchange_ids if proposal is not None else []
            await self._failed(step, selection, str(exc), ids, fatal=False)
            return
        await self._recorded(step, node)

    async def _select(self, step: int) -> Selection:
        """The policy's choice for ``step``; in parallel runs, steered off work already in flight."""
        run = self.run_record
        tree = await self.service.tree(run.id)
        pending = [s for s in self.in_flight.values() if s is not None]
        selection = select_around(tree, self.config, run.seed, step, pending)
        self.in_flight[step] = selection
        return selection

    # ---- bookkeeping ---------------------------------------------------------------------

    async def _on_exchange(self, record: ExchangeRecord, selection: Selection, step: int) -> None:
        self.usage = self.usage + record.usage
        await self._emit("llm", step=step, node_id=selection.node_id, role=record.role,
                         message=record.error or "")

    async def _failed(
        self, step: int, selection: Selection, error: str, ids: list[int], *, fatal: bool
    ) -> None:
        self.failed.append(FailedExpansion(step=step, node_id=selection.node_id, action=selection.action,
                                           error=error, exchange_ids=ids))
        async with self.cond:
            self.consecutive_failures += 1
            if fatal:
                self.stop, self.stop_message = "llm_error", error
            self.cond.notify_all()
        await self._emit("failed", step=step, node_id=selection.node_id, action=selection.action,
                         message=error)

    async def _recorded(self, step: int, node: Node) -> None:
        async with self.cond:
            self.recorded += 1
            self.new_attempts += 1
            self.consecutive_failures = 0
            if node.evaluation is not None and node.evaluation.passed and (
                self.best is None or node.score < self.best.score
            ):
                self.best = node
                self._check_sol()
            self.cond.notify_all()
        evaluation = node.evaluation
        await self._emit(
            "recorded", step=step, node_id=node.id, parent_id=node.parent_id, action=node.action.value,
            verdict=_verdict(evaluation.status.value, evaluation.reason) if evaluation else None,
            speedup=eager_speedup(node),
        )

    def _check_sol(self) -> None:
        reached = sol_reached(self.limits, self.best) if self.stop is None else None
        if reached is not None:
            self.stop, self.stop_message = "sol", reached

    async def _emit(self, kind: str, **fields: Any) -> None:
        if self.progress is None:
            return
        best_speedup = eager_speedup(self.best)
        event = SearchEvent(
            kind=kind,  # type: ignore[arg-type]
            run_id=self.run_record.id, attempt=self.recorded, budget=self.run_record.budget,
            target=self.target, best_node_id=self.best.id if best_speedup is not None and self.best else None,
            best_speedup=best_speedup, tokens=self.usage.input_tokens + self.usage.output_tokens,
            cost_usd=self.usage.cost_usd, **fields,
        )
        await self.progress(event)


def _verdict(status: str, reason: str | None) -> str:
    return f"{status} ({reason})" if reason else status


def _single(exc: BaseException) -> BaseException:
    """The task group's one real error, unwrapped; cancellations of siblings are noise."""
    while isinstance(exc, BaseExceptionGroup):
        real = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (real or list(exc.exceptions))[0]
    return exc


__all__ = ["Limits", "SearchEvent", "SearchSummary", "run_search", "strategy_for"]
