"""The MCP tools: thin adapters over RunService, one call each, structured results.

Each tool is a module-level function; ``register_tools`` only attaches them, with their
titles and hints. Docstrings are what a host's model reads, so they say what to pass, what
comes back and what to call next. Every tool is ``async``: a sync tool would run in a thread
that a cancelled call cannot stop, and cancelling must kill the evaluation's processes.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from stark_mcp.device import DEVICE_NAMES
from stark_mcp.llm import MissingAPIKey
from stark_mcp.orchestrator.export import ExportedKernel
from stark_mcp.orchestrator.limits import Limits
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.server.errors import tool_errors
from stark_mcp.server.outputs import (
    ChildAdded,
    ContextPrompt,
    EvaluationResult,
    KernelEvaluation,
    Leaderboard,
    NodeDetail,
    NodeSelection,
    OptimizeResult,
    RunCreated,
    RunList,
    finite,
)
from stark_mcp.server.progress_relay import relay, search_relay
from stark_mcp.server.state import app_state, run_owner
from stark_mcp.server.tasks.extension import declares_tasks
from stark_mcp.server.tasks.questions import extend_spent_budget


def _hints(*, read_only: bool, idempotent: bool, open_world: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=read_only, destructive_hint=None if read_only else False,
        idempotent_hint=idempotent, open_world_hint=open_world,
    )


READ_ONLY = _hints(read_only=True, idempotent=True)
RECORDS = _hints(read_only=False, idempotent=False)
EVALUATES = _hints(read_only=False, idempotent=True)
CALLS_LLM = _hints(read_only=False, idempotent=False, open_world=True)

NO_BACKEND = (
    "optimize needs an LLM API: set ANTHROPIC_API_KEY (or STARK_LLM) in the server's environment and "
    "restart it. Without one, drive the loop yourself with the tools: select_node, build_context, "
    "write the plan and code, add_child, repeated until the budget is used."
)

RunId = Annotated[str, Field(description="the run id from create_run or list_runs, e.g. r-7kq2mz")]
NodeId = Annotated[str, Field(description="a node id of that run, e.g. n0 (the root) or n3")]
Source = Annotated[str, Field(description="the complete Python file defining class ModelNew(nn.Module)")]
ProblemArg = Annotated[
    str, Field(description="path to a problem .py file (or file.jsonl:LEVEL/ID) inside the server's roots "
               "(relative paths start at its working folder); the source itself only where the server "
               "allows problem sources")
]
DeviceArg = Annotated[
    str | None, Field(description=f"{DEVICE_NAMES} (default: the server's STARK_DEVICE, else auto)")
]
RoleArg = Annotated[str, Field(description="plan, code or debug")]
PlanForCode = Annotated[
    str | None, Field(description="role 'code' only: the plan (advice + anchored scaffold)")
]
ParentId = Annotated[str, Field(description="the node this attempt improves or repairs (from select_node)")]
ActionArg = Annotated[str, Field(description="'plan' for plan+code, 'debug' for a repair of parent_id")]
EvaluationId = Annotated[str | None, Field(description="from evaluate_kernel on this same source")]
ExportNode = Annotated[str | None, Field(description="a node id; default: the fastest correct node")]
OptimizeBudget = Annotated[
    int | None, Field(description="attempts to make now; default: all that are left", ge=1)
]
StopAtSol = Annotated[
    float | None,
    Field(description="stop once the best attempt reaches this fraction of its floor, e.g. 0.9", gt=0),
]
ROLE_NEXT = {
    "plan": "Answer with the plan, then call build_context with role='code' and plan=<your answer>.",
    "code": "Write the full source, then add_child(run_id, parent_id=node_id, source, plan, action='plan').",
    "debug": "Write the repaired source, then add_child(run_id, parent_id=node_id, source, action='debug').",
}


# Only for clients that declared MCP tasks: a blocking client's answers stay as they were.
PIPELINE_NEXT = (
    " Your client runs MCP tasks: add_child returns a task at once, so call select_node and write the"
    " next attempt while this one builds (up to 3 in flight), then read each task's result."
)


def _after_child(attempts_left: int) -> str:
    if attempts_left > 0:
        return f"{attempts_left} attempts left: call select_node for the next one."
    return "Budget used: call leaderboard, then export_kernel for the best kernel."


async def create_run(
    problem: ProblemArg,
    ctx: Context,
    device: DeviceArg = None,
    policy: Annotated[str, Field(description="stark, greedy, sampling, reflexion or mcts")] = "stark",
    budget: Annotated[int, Field(description="attempts allowed, the root not counted", ge=1)] = 30,
    seed: Annotated[int | None, Field(description="seed of the policy's random choices")] = None,
    name: Annotated[str | None, Field(description="a label for the run")] = None,
    language: Annotated[
        str | None,
        Field(description="what kernels are written in: cuda (CUDA C++) or triton on a GPU, cpp on the "
              "CPU (default: cuda on a GPU, cpp on the CPU)"),
    ] = None,
) -> RunCreated:
    """Start an optimization run: checks that the problem runs, times its eager baseline and records
    the reference as root node, then returns; the torch.compile baselines are timed in the background
    (pending_baselines) and their speedups fill in on every node when ready. language says what the
    kernels are written in. The problem must define class Model(nn.Module), get_inputs() and
    get_init_inputs(). Next: select_node(run_id)."""
    state = app_state(ctx)
    with tool_errors():
        run, root = await state.service.create_run(
            problem, device=device or state.settings.device, policy=policy, budget=budget, seed=seed,
            name=name, progress=relay(ctx), language=language, roots=state.roots,
        )
    return RunCreated(
        run_id=run.id, root_node_id=root.id, problem=run.problem.name, device=run.device,
        policy=str(run.policy.get("name", policy)), budget=run.budget, seed=run.seed,
        baselines_ms={k: v.median_ms for k, v in run.baselines.items()},
        language=run.language, pending_baselines=list(run.pending_baselines),
        next=f"Call select_node(run_id={run.id!r}).",
    )


async def select_node(run_id: RunId, ctx: Context) -> NodeSelection:
    """Apply the run's search policy to its tree. Returns node_id and action: 'plan' (write a plan
    and then code for a new child of this node) or 'debug' (repair this failing node), with why.
    The same tree always gives the same choice. Fails once the budget is used."""
    service = app_state(ctx).service
    with tool_errors():
        selection = await service.select_node(run_id)
        left = await service.attempts_left(run_id)
    if selection.action == "plan":
        hint = (
            f"Call build_context(run_id={run_id!r}, node_id={selection.node_id!r}, role='plan'); then "
            "role='code' with plan=<your plan>; then add_child(..., action='plan')."
        )
    else:
        hint = (
            f"Call build_context(run_id={run_id!r}, node_id={selection.node_id!r}, role='debug'), "
            "write the fixed source, then add_child(..., action='debug')."
        )
    return NodeSelection(
        run_id=run_id, node_id=selection.node_id, action=selection.action, reason=selection.reason,
        attempts_left=left, next=hint,
    )


async def build_context(
    run_id: RunId, node_id: NodeId, role: RoleArg, ctx: Context, plan: PlanForCode = None
) -> ContextPrompt:
    """The full prompt for one role at one node, built from that role's context window of the tree
    (the node, the root, and the related attempts with their results). Answer the prompt yourself.
    role 'plan': reply with advice and the node's source with '# <<<IMPROVE BEGIN>>>' /
    '# <<<IMPROVE END>>>' lines around the code to change. role 'code': pass that reply as plan
    (its anchors are validated against the node); reply with the full ModelNew source.
    role 'debug': reply with the repaired full source."""
    if role not in ROLE_NEXT:
        # The service also knows 'generalist' (one agent, for the comparison strategies); hosts
        # play the three roles.
        raise ToolError(f"unknown role {role!r}; use plan, code or debug")
    with tool_errors():
        prompt = await app_state(ctx).service.build_context(run_id, node_id, role, plan)
    pipeline = role != "plan" and declares_tasks(ctx.request_context)
    return ContextPrompt(
        run_id=run_id, node_id=node_id, role=role, prompt=prompt.text, node_ids=prompt.node_ids,
        next=ROLE_NEXT[role] + (PIPELINE_NEXT if pipeline else ""),
    )


async def evaluate_kernel(run_id: RunId, source: Source, ctx: Context) -> KernelEvaluation:
    """Build, check and time a candidate against the run's problem on the run's device, without
    adding it to the tree (progress is reported per phase). Returns status (passed, build_error,
    load_error, runtime_error, timeout, wrong_output, rejected), reason, message, runtime_ms,
    speedups and trimmed logs, plus an evaluation_id: pass it to add_child with the same source
    to record this result without evaluating again."""
    with tool_errors():
        stored = await app_state(ctx).service.evaluate(run_id, source, progress=relay(ctx))
    hint = (
        "Record it with add_child(..., evaluation_id=...)."
        if stored.evaluation.passed
        else "Fix the source (see message and logs) and evaluate again, "
        "or record the attempt with add_child."
    )
    return KernelEvaluation.stored(stored, hint)


async def add_child(
    run_id: RunId,
    parent_id: ParentId,
    source: Source,
    ctx: Context,
    plan: Annotated[str | None, Field(description="the plan the code follows (action 'plan')")] = None,
    action: ActionArg = "plan",
    evaluation_id: EvaluationId = None,
) -> ChildAdded:
    """Record an attempt as a child of parent_id. The server evaluates the source itself (or reuses
    evaluation_id when it belongs to this run and this exact source); a result can never be supplied.
    Returns the new node_id with its status, runtime and speedups, and the attempts left."""
    state = app_state(ctx)
    service = state.service
    with tool_errors():
        node = await service.add_child(
            run_id, parent_id, source, plan=plan, action=action, evaluation_id=evaluation_id,
            progress=relay(ctx), owner=run_owner(ctx),
        )
        left = await service.attempts_left(run_id)
    result = EvaluationResult.of(node.evaluation) if node.evaluation else None
    return ChildAdded(
        run_id=run_id, node_id=node.id, parent_id=parent_id, action=node.action.value,
        status=result.status if result else "unknown", reason=result.reason if result else None,
        message=result.message if result else "", runtime_ms=result.runtime_ms if result else None,
        speedups=result.speedups if result else {}, shapes=result.shapes if result else [],
        adherence=node.adherence, attempts_left=left, next=_after_child(left),
    )


async def leaderboard(
    run_id: RunId, ctx: Context,
    k: Annotated[int, Field(description="how many entries", ge=1, le=100)] = 5,
) -> Leaderboard:
    """The k fastest distinct correct nodes of the run, fastest first, each with node_id,
    runtime_ms (median) and speedups over the baselines (eager, torch.compile). Sources that
    differ only in comments or layout count as one."""
    with tool_errors():
        entries = await app_state(ctx).service.leaderboard(run_id, k)
    return Leaderboard(run_id=run_id, entries=entries)


async def list_runs(ctx: Context) -> RunList:
    """Every run in the server's database, newest first, with attempts made, attempts passed and
    the best node so far."""
    with tool_errors():
        return RunList(runs=await app_state(ctx).service.summaries())


async def get_node(run_id: RunId, node_id: NodeId, ctx: Context) -> NodeDetail:
    """One attempt in full: parent, children, the action that made it, its plan, source and the
    server's evaluation of it (status, reason, message, runtime, speedups, logs), its per-kernel
    profile when it has one (GPU; profile_kernel takes one on demand), and which of the run's
    baselines are still being timed (pending_baselines)."""
    service = app_state(ctx).service
    with tool_errors():
        tree = await service.tree(run_id)
        node = tree.get(node_id)
        children = [child.id for child in tree.children(node_id)]
        run = await service.get_run(run_id)
    return NodeDetail(
        run_id=run_id, node_id=node.id, parent_id=node.parent_id, action=node.action.value,
        children=children, plan=node.plan, source=node.source, adherence=node.adherence,
        evaluation=EvaluationResult.of(node.evaluation) if node.evaluation else None,
        profile=node.evaluation.profile if node.evaluation else None,
        pending_baselines=list(run.pending_baselines),
    )


async def export_kernel(run_id: RunId, ctx: Context, node_id: ExportNode = None) -> ExportedKernel:
    """A runnable Python file for a correct node (default: the run's best): its ModelNew source plus
    a __main__ self-check that compares it with the reference and times both the way the evaluator
    does. Save it and import ModelNew from it. A node that did not pass is refused; warnings say
    when the kernel is slower than eager PyTorch."""
    with tool_errors():
        return await app_state(ctx).service.export(run_id, node_id)


async def optimize(
    run_id: RunId, ctx: Context, budget: OptimizeBudget = None, stop_at_sol: StopAtSol = None
) -> OptimizeResult:
    """Run the STARK loop inside the server (plan, code and debug agents calling the configured LLM
    API) for up to budget attempts, reporting progress per attempt; with stop_at_sol, stop once the
    best attempt reaches that fraction of the problem's floor on this machine. Needs ANTHROPIC_API_KEY
    or STARK_LLM in the server's environment; otherwise drive the loop with the other tools."""
    state = app_state(ctx)
    service = state.service
    with tool_errors():
        try:
            backend = state.backend_factory()
        except MissingAPIKey:
            raise ToolError(NO_BACKEND) from None
        await service.get_run(run_id)  # an unknown run fails before any LLM call
        await extend_spent_budget(service, run_id)  # as a task, a spent budget asks the user
        summary = await run_search(
            service, run_id, backend, budget=budget, progress=search_relay(ctx),
            limits=Limits(stop_at_sol=stop_at_sol), owner=run_owner(ctx),
        )
        left = await service.attempts_left(run_id)
    return OptimizeResult(
        run_id=run_id, attempts=summary.new_attempts, attempts_left=left, stop_reason=summary.stop_reason,
        message=summary.message, best_node_id=summary.best_node_id,
        best_runtime_ms=summary.best_runtime_ms,
        best_speedups=finite(summary.speedups), cost_usd=summary.usage.cost_usd,
        failed_expansions=len(summary.failed_expansions),
        next=_after_child(left) if left else "Budget used: call leaderboard, then export_kernel.",
    )


TOOLS: tuple[tuple[Any, str, ToolAnnotations], ...] = (
    (create_run, "Create a run", RECORDS),
    (select_node, "Select the node to expand", READ_ONLY),
    (build_context, "Build a role's prompt", READ_ONLY),
    (evaluate_kernel, "Evaluate a kernel without recording it", EVALUATES),
    (add_child, "Record an attempt", RECORDS),
    (leaderboard, "Leaderboard", READ_ONLY),
    (list_runs, "List runs", READ_ONLY),
    (get_node, "Get a node", READ_ONLY),
    (export_kernel, "Export a kernel", READ_ONLY),
    (optimize, "Optimize with the server's own LLM", CALLS_LLM),
)


def register_tools(server: MCPServer[Any]) -> None:
    for tool, title, hints in TOOLS:
        server.tool(title=title, annotations=hints)(tool)
