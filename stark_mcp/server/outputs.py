"""The structured results of the MCP tools: what a host's model reads back.

Flat records with the numbers an agent acts on (status, reason, runtime, speedups)
and a ``next`` hint naming the tool to call afterwards. Built from the core's
records here so the tools stay one-liners.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from stark_mcp.orchestrator.reads import LeaderboardEntry, RunSummary, finite
from stark_mcp.records import Evaluation, ProfileReport, ShapeResult, StoredEvaluation, TrustReport
from stark_mcp.sol.text import sol_sentence


class RunCreated(BaseModel):
    run_id: str
    root_node_id: str = Field(description="the reference module's node; select_node starts from it")
    problem: str = Field(description="the problem's name")
    device: str = Field(description="where candidates are evaluated: cuda or cpu")
    policy: str
    budget: int = Field(description="attempts allowed, the root not counted")
    seed: int
    baselines_ms: dict[str, float] = Field(
        description="median runtime of each baseline timed so far, in ms (eager, compile...)"
    )
    language: str = Field(description="what candidates write kernels in: cuda, triton or cpp")
    pending_baselines: list[str] = Field(
        default_factory=list,
        description="baselines being timed in the background; speedups over them fill in when ready",
    )
    next: str


class NodeSelection(BaseModel):
    run_id: str
    node_id: str = Field(description="the node to expand")
    action: str = Field(description="plan: plan then code a new child; debug: repair this failing node")
    reason: str = Field(description="why the policy chose it")
    attempts_left: int
    next: str


class ContextPrompt(BaseModel):
    run_id: str
    node_id: str
    role: str
    prompt: str = Field(description="the full prompt for the role: follow it and reply as it asks")
    node_ids: list[str] = Field(description="the historical nodes shown in the role's context window")
    next: str


class ShapeSpeedup(BaseModel):
    """The candidate on one input set of a problem that declares several."""

    label: str = Field(description="the input set, e.g. batch=8,seq=128")
    runtime_ms: float | None = None
    speedups: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def of(cls, shape: ShapeResult) -> ShapeSpeedup:
        runtime = shape.runtime.median_ms if shape.runtime else None
        return cls(label=shape.label, runtime_ms=runtime, speedups=finite(shape.speedups))


class EvaluationResult(BaseModel):
    """One verdict of the trusted evaluator, flattened for reading."""

    status: str = Field(
        description="passed, build_error, load_error, runtime_error, timeout, wrong_output or rejected"
    )
    reason: str | None = Field(None, description="machine-readable reason code, e.g. tolerance, shape")
    message: str = ""
    runtime_ms: float | None = Field(None, description="median runtime in ms (passed only)")
    iqr_ms: float | None = None
    speedups: dict[str, float] = Field(default_factory=dict, description="baseline median / candidate median")
    flags: list[str] = Field(default_factory=list)
    max_rel_error: float | None = None
    tolerance: float | None = None
    logs: dict[str, str] = Field(default_factory=dict, description="trimmed logs by phase")
    cached: bool = False
    trust: TrustReport | None = Field(
        None, description="what the trusted side checked: isolation, verified calls, both clocks, findings"
    )
    shapes: list[ShapeSpeedup] = Field(
        default_factory=list, description="per input set; runtime_ms and speedups are their geometric mean"
    )
    sol_fraction: float | None = Field(
        None, description="the problem's floor on this machine / runtime_ms: 1.0 is the speed of light"
    )
    speed_of_light: str | None = Field(None, description="where the time stands against the floor, in words")

    @classmethod
    def of(cls, evaluation: Evaluation) -> EvaluationResult:
        runtime = evaluation.runtime
        correctness = evaluation.correctness
        return cls(
            status=evaluation.status.value, reason=evaluation.reason, message=evaluation.message,
            runtime_ms=runtime.median_ms if runtime else None, iqr_ms=runtime.iqr_ms if runtime else None,
            speedups=finite(evaluation.speedups), flags=list(evaluation.flags),
            max_rel_error=correctness.rel_norm_error if correctness else None,
            tolerance=correctness.tolerance if correctness else None,
            logs=dict(evaluation.logs), cached=evaluation.cached, trust=evaluation.trust,
            shapes=[ShapeSpeedup.of(shape) for shape in evaluation.shapes],
            sol_fraction=evaluation.sol.fraction if evaluation.sol else None,
            speed_of_light=sol_sentence(evaluation.sol) if evaluation.sol else None,
        )


class KernelEvaluation(EvaluationResult):
    evaluation_id: str = Field(description="pass it to add_child with the same source to record this result")
    next: str

    @classmethod
    def stored(cls, stored: StoredEvaluation, next_hint: str) -> KernelEvaluation:
        base = EvaluationResult.of(stored.evaluation)
        return cls(**base.model_dump(), evaluation_id=stored.id, next=next_hint)


class ChildAdded(BaseModel):
    run_id: str
    node_id: str
    parent_id: str
    action: str
    status: str
    reason: str | None = None
    message: str = ""
    runtime_ms: float | None = None
    speedups: dict[str, float] = Field(default_factory=dict)
    shapes: list[ShapeSpeedup] = Field(default_factory=list, description="per input set (several declared)")
    adherence: float | None = Field(
        None, description="share of changed lines inside the plan's anchored spans"
    )
    attempts_left: int
    next: str


class Leaderboard(BaseModel):
    run_id: str
    entries: list[LeaderboardEntry] = Field(description="fastest distinct correct nodes, fastest first")


class RunList(BaseModel):
    runs: list[RunSummary] = Field(description="newest first")


class NodeDetail(BaseModel):
    run_id: str
    node_id: str
    parent_id: str | None
    action: str
    children: list[str]
    plan: str | None
    source: str
    adherence: float | None
    evaluation: EvaluationResult | None
    profile: ProfileReport | None = Field(
        None, description="where the node's forward spends device time, per kernel (GPU; see profile_kernel)"
    )
    pending_baselines: list[str] = Field(
        default_factory=list,
        description="the run's baselines still being timed: this node's speedups over them come later",
    )


class OptimizeResult(BaseModel):
    run_id: str
    attempts: int = Field(description="attempts recorded by this call")
    attempts_left: int
    stop_reason: str = Field(description="why the loop stopped: budget, a limit, ...")
    message: str
    best_node_id: str | None
    best_runtime_ms: float | None
    best_speedups: dict[str, float] = Field(default_factory=dict)
    cost_usd: float = Field(0.0, description="LLM cost of the whole run so far")
    failed_expansions: int = Field(0, description="expansions whose agents produced no usable attempt")
    next: str
