"""One expansion of a selected node: the agents' calls that turn it into a new candidate source.

``expand`` asks the strategy's agents (plan then code, debug for a failing node, or the one
generalist agent), logs every LLM exchange to the store as each agent call ends (with the
reason a reply was rejected, when it was), and returns the candidate for the loop to evaluate
and record. An expansion that yields no source raises ``ExpansionFailed``; its exchanges stay
in the store without a node.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from stark_mcp.agents import (
    PLAN_FOCI,
    AgentError,
    CodeAgent,
    DebugAgent,
    Exchange,
    GeneralistAgent,
    PlanAgent,
    Prompt,
    render_prompt,
)
from stark_mcp.llm import LLMBackend, LLMCallFailed, LLMError, LLMReply, LLMRequest, MissingAPIKey
from stark_mcp.orchestrator.errors import ExpansionFailed
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.strategies import Strategy
from stark_mcp.records import ExchangeRecord, RunRecord, Usage
from stark_mcp.tree import Selection

# HTTP statuses after which another call cannot succeed without the user changing something.
_FATAL_STATUS = frozenset({401, 403})
INTERRUPTED = "interrupted before this reply was used"

OnExchange = Callable[[ExchangeRecord], Awaitable[None]]


@dataclass
class Proposal:
    """What the agents proposed for one selection (evaluated and recorded by the loop)."""

    source: str
    action: str
    plan: str | None
    exchange_ids: list[int]
    usage: Usage


@dataclass
class _Call:
    request: LLMRequest
    reply: LLMReply | None = None
    error: str | None = None


@dataclass
class ExchangeLog:
    """Logs one expansion's exchanges and remembers their ids and usage.

    Also a backend wrapper: it notes each call as it completes, so calls an agent made
    before a cancellation are still logged (the agent itself only reports them at its end).
    """

    service: RunService
    run: RunRecord
    backend: LLMBackend
    on_exchange: OnExchange | None = None
    ids: list[int] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    _unlogged: list[_Call] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.backend.name

    async def complete(self, request: LLMRequest) -> LLMReply:
        call = _Call(request)
        self._unlogged.append(call)
        try:
            call.reply = await self.backend.complete(request)
        except LLMError as exc:
            call.error = str(exc)
            raise
        return call.reply

    async def log(self, exchanges: Sequence[Exchange]) -> None:
        self._unlogged.clear()
        for exchange in exchanges:
            await self._log_one(exchange.role, exchange.request, exchange.reply, exchange.error)

    async def log_unlogged(self) -> None:
        """After a cancellation: keep the calls the interrupted agent had made."""
        calls, self._unlogged = self._unlogged, []
        for call in calls:
            if call.reply is not None or call.error is not None:
                await self._log_one(call.request.role, call.request, call.reply, call.error or INTERRUPTED)

    async def _log_one(
        self, role: str, request: LLMRequest, reply: LLMReply | None, error: str | None
    ) -> None:
        usage = reply.usage if reply is not None else Usage()
        record = await self.service.store.log_exchange(
            run_id=self.run.id, node_id=None, role=role, model=reply.model if reply else self._model(role),
            request=request.model_dump(mode="json"), reply=reply.text if reply else "", usage=usage,
            error=error,
        )
        self.ids.append(record.id)
        self.usage = self.usage + usage
        if self.on_exchange is not None:
            await self.on_exchange(record)

    def _model(self, role: str) -> str:
        profiles = getattr(self.backend, "profiles", None)
        if isinstance(profiles, dict) and role in profiles:
            return str(profiles[role].model)
        return str(getattr(self.backend, "model", self.backend.name))


async def expand(
    service: RunService,
    run: RunRecord,
    strategy: Strategy,
    backend: LLMBackend,
    selection: Selection,
    step: int,
    *,
    on_exchange: OnExchange | None = None,
) -> Proposal:
    """Ask the strategy's agents for a new source for ``selection``; ``ExpansionFailed`` if none comes."""
    log = ExchangeLog(service, run, backend, on_exchange)
    try:
        source, plan = await _ask_agents(service, run, strategy, log, selection, step)
    except (AgentError, LLMError) as exc:
        await log.log(getattr(exc, "exchanges", []))
        raise ExpansionFailed(str(exc), exchange_ids=log.ids, fatal=_is_fatal(exc)) from exc
    except BaseException:
        await log.log_unlogged()
        raise
    return Proposal(source=source, action=selection.action, plan=plan, exchange_ids=log.ids, usage=log.usage)


async def _ask_agents(
    service: RunService, run: RunRecord, strategy: Strategy, log: ExchangeLog, selection: Selection, step: int
) -> tuple[str, str | None]:
    node_id = selection.node_id
    if strategy.agents == "generalist":
        prompt = await _prompt(service, run, strategy, node_id, "generalist", step)
        source, exchanges = await GeneralistAgent(log).run(prompt)
        await log.log(exchanges)
        return source, None
    if selection.action == "debug":
        prompt = await _prompt(service, run, strategy, node_id, "debug", step)
        source, exchanges = await DebugAgent(log).run(prompt)
        await log.log(exchanges)
        return source, None  # RunService gives a debug child its parent's plan
    node = await service.node(run.id, node_id)
    prompt = await _prompt(service, run, strategy, node_id, "plan", step)
    plan, exchanges = await PlanAgent(log, anchored=strategy.anchors).run(prompt, node.source)
    await log.log(exchanges)
    prompt = await _prompt(service, run, strategy, node_id, "code", step, plan=plan.text)
    source, exchanges = await CodeAgent(log).run(prompt)
    await log.log(exchanges)
    return source, plan.text


async def _prompt(
    service: RunService, run: RunRecord, strategy: Strategy, node_id: str, role: str, step: int,
    plan: str | None = None,
) -> Prompt:
    if strategy.history:
        return await service.build_context(
            run.id, node_id, role, plan=plan, step=step, window=strategy.window, anchored=strategy.anchors
        )
    # Independent samples: no history at all, so attempt k cannot see attempts before it.
    varied = strategy.vary_focus and role in ("plan", "generalist")
    focus = PLAN_FOCI[step % len(PLAN_FOCI)] if varied else None
    return render_prompt(
        role,  # type: ignore[arg-type]  # one of the four role names
        problem=run.problem, tree=await service.tree(run.id), node_id=node_id, window_ids=[],
        device=run.device, plan=plan, focus=focus, templates=service.templates,
        anchored=strategy.anchors,
    )


def _is_fatal(exc: BaseException) -> bool:
    if isinstance(exc, MissingAPIKey):
        return True
    return isinstance(exc, LLMCallFailed) and exc.status_code in _FATAL_STATUS
