"""Typed records shared by every layer: verdicts, LLM usage, runs, nodes and what the store keeps.

Pure data, no IO. The tree, store, server and orchestrator all speak these, so
they live below every package that uses them.
"""

from __future__ import annotations

import hashlib
import json
import math
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from stark_mcp.problems import Problem
from stark_mcp.sol.model import SolReport


class Status(StrEnum):
    """The evaluator's verdict vocabulary; part of the public JSON interface."""

    PASSED = "passed"
    BUILD_ERROR = "build_error"
    LOAD_ERROR = "load_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG_OUTPUT = "wrong_output"
    REJECTED = "rejected"

    @property
    def is_bug(self) -> bool:
        """A failed build, load, run or check: the search repairs these with debug."""
        return self is not Status.PASSED


class TimingStats(BaseModel):
    """Per-call times of one timed callable, in milliseconds."""

    model_config = ConfigDict(frozen=True)

    median_ms: float
    iqr_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    samples: int
    unit: str = "ms"


class CorrectnessReport(BaseModel):
    """What the comparison against the trusted reference found, over all trials."""

    trials: int = 0
    trials_passed: int = 0
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    rel_norm_error: float | None = Field(
        None, description="worst ||out - ref64|| / ||ref64|| over trials and outputs"
    )
    tolerance: float | None = Field(None, description="rel-norm threshold of the precision contract")
    allclose_1e2: bool | None = Field(None, description="KernelBench v0/v0.1 verdict, atol=rtol=1e-2")
    allclose_1e4: bool | None = Field(None, description="KernelBench HEAD fp32 verdict, atol=rtol=1e-4")


class ShapeResult(BaseModel):
    """One declared input shape of a problem: the candidate's time there and its baselines'."""

    label: str = Field(description="the shape's keyword arguments, e.g. batch=8,seq=128; 'default' if none")
    runtime: TimingStats | None = None
    baselines: dict[str, TimingStats] = Field(default_factory=dict)
    speedups: dict[str, float] = Field(default_factory=dict, description="baseline median / candidate median")


class TrustReport(BaseModel):
    """Which defences of the evaluator ran on this evaluation and what they saw.

    Every figure here was taken by a trusted process; nothing the candidate's own process
    reported appears except ``reported_ms``, kept only as a cross-check.
    """

    isolation: str = Field("", description="sandbox, uid or process: how the candidate was walled off")
    isolation_note: str = Field("", description="why the level is not 'sandbox', and how to raise it")
    calls: int = Field(0, description="forward calls the candidate made, every one on fresh inputs")
    checked_calls: int = Field(0, description="calls whose outputs a trusted process compared")
    timed_calls: int = 0
    timed_checked: int = Field(0, description="timed calls secretly picked and checked")
    reported_ms: float | None = Field(None, description="median the candidate's process reported")
    external_ms: float | None = Field(None, description="median bound from the trusted clock")
    overhead_ms: float | None = Field(None, description="protocol cost per call, calibrated on the baseline")
    baseline_side_by_side: bool = Field(
        False, description="the eager baseline was re-timed in the same window"
    )
    own_kernel_share: float | None = None
    defences: list[str] = Field(default_factory=list, description="the defences that ran")
    findings: list[str] = Field(default_factory=list, description="what they saw, one line each")


class StallReason(BaseModel):
    """One reason warps of a kernel waited instead of issuing, as Nsight Compute names it."""

    reason: str = Field(description="e.g. long_scoreboard (global memory), barrier, math_pipe_throttle")
    share: float = Field(description="fraction of the kernel's stalled warp cycles, 0..1")


class Roofline(BaseModel):
    """Where a kernel sits on the roofline of its GPU (DRAM roof and FP compute roof).

    FLOPs count the FP32, FP64 and FP16 instructions outside tensor cores (an FMA is two);
    ``tensor_core`` says when tensor-core instructions ran too, which this count leaves out.
    """

    flops: float
    dram_bytes: float
    arithmetic_intensity: float | None = Field(None, description="FLOPs per DRAM byte")
    achieved_flops_per_s: float | None = None
    peak_flops_per_s: float | None = Field(None, description="the compute roof for the kernel's precision")
    peak_dram_bytes_per_s: float | None = None
    ridge_point: float | None = Field(None, description="intensity where the two roofs meet")
    attainable_flops_per_s: float | None = Field(None, description="min(compute roof, intensity * DRAM roof)")
    achieved_fraction: float | None = Field(None, description="achieved / attainable, 0..1")
    side: str | None = Field(None, description="memory or compute: which roof bounds it at its intensity")
    tensor_core: bool = False


class KernelProfile(BaseModel):
    """One kernel of a profiled forward (launches of the same kernel and launch shape merged)."""

    name: str = Field(description="the kernel's name as the profiler reports it")
    short_name: str = Field(description="without namespaces, template arguments and parameters")
    own: bool | None = Field(None, description="defined in the candidate's source (__global__ or Triton)")
    launches: int = 1
    time_us: float = Field(description="device time of its launches in this forward")
    share: float = Field(description="fraction of the profiled device time, 0..1")
    grid: list[int] | None = None
    block: list[int] | None = None
    registers_per_thread: int | None = None
    shared_memory_bytes: int | None = Field(None, description="per block, static plus dynamic")
    theoretical_occupancy_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    dram_throughput_pct: float | None = Field(None, description="DRAM throughput, % of peak")
    memory_throughput_pct: float | None = Field(None, description="busiest memory unit, % of peak")
    sm_throughput_pct: float | None = Field(None, description="compute (SM) throughput, % of peak")
    l1_hit_rate_pct: float | None = None
    l2_hit_rate_pct: float | None = None
    stalls: list[StallReason] = Field(default_factory=list, description="top warp stall reasons")
    roofline: Roofline | None = None
    bound: str | None = Field(None, description="memory, compute, latency or balanced (from the throughputs)")


class ProfileReport(BaseModel):
    """Where a candidate's forward spends device time, kernel by kernel.

    Taken after timing, in a separate run of the candidate, so it never changes a verdict or a
    time. ``source`` says what measured it: Nsight Compute's counters, the torch profiler's
    kernel list (names, times and launch shapes only) when counters cannot be read, or nothing.
    """

    source: str = Field(description="ncu, torch_profiler or none")
    reason: str = Field("", description="why the source is not ncu (or why there is no profile)")
    device_name: str = ""
    shape: str = Field("", description="the input shape that was profiled")
    kernels: list[KernelProfile] = Field(default_factory=list, description="slowest first")
    total_time_us: float = 0.0
    truncated: bool = Field(False, description="the forward launched more kernels than were profiled")
    seconds: float = Field(0.0, description="wall time the profile cost")
    notes: list[str] = Field(default_factory=list)

    def supersedes(self, kept: ProfileReport | None) -> bool:
        """Shown instead of ``kept``, the profile there before it: unless this one has no kernels
        and ``kept`` has some (a failed profile never hides a good one)."""
        return kept is None or bool(self.kernels) or not kept.kernels


class Dependencies(BaseModel):
    """Everything a verdict and its times depend on besides the problem's and the candidate's text:
    a cached result is reused only when all of it is unchanged (docs/evaluator.md, "What a verdict
    depends on")."""

    model_config = ConfigDict(frozen=True)

    evaluator: str = Field(description="digest of the evaluator's own sources (evaluator/, sol/)")
    torch: str
    cuda: str | None = Field(None, description="the CUDA version torch was built with")
    driver: str | None = Field(None, description="the GPU driver's version (GPU evaluations)")
    device: str = Field(description="the device's model name")
    isolation: str
    settings: dict[str, Any] = Field(default_factory=dict, description="every setting that changes a verdict")
    user_files: dict[str, str] = Field(
        default_factory=dict, description="the user's files the problem and candidate import: path -> digest"
    )

    @property
    def digest(self) -> str:
        data = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]


class Evaluation(BaseModel):
    """The verdict on one candidate source for one problem on one device.

    With several declared shapes, ``runtime`` and ``speedups`` are geometric means over
    ``shapes``; with one, ``shapes`` holds that one.
    """

    status: Status
    reason: str | None = Field(None, description="machine-readable reason code, e.g. shape, tolerance")
    message: str = ""
    logs: dict[str, str] = Field(default_factory=dict, description="trimmed logs by phase")
    runtime: TimingStats | None = None
    baselines: dict[str, TimingStats] = Field(default_factory=dict)
    speedups: dict[str, float] = Field(default_factory=dict, description="baseline median / candidate median")
    flags: list[str] = Field(default_factory=list)
    correctness: CorrectnessReport | None = None
    own_kernel_share: float | None = Field(
        None, description="share of device time spent in the candidate's own kernels (GPU only)"
    )
    device: str = ""
    device_name: str = ""
    problem_hash: str = ""
    source_hash: str = ""
    settings_hash: str = ""
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    wall_seconds: float | None = Field(None, description="the whole evaluation; phase_seconds add up to it")
    extensions: list[dict[str, Any]] = Field(
        default_factory=list,
        description="one entry per load_inline build: name, key, layout (fast, torch_headers, cpp), "
        "cached, seconds, strategy, variants, fallbacks",
    )
    shapes: list[ShapeResult] = Field(default_factory=list)
    trust: TrustReport | None = None
    profile: ProfileReport | None = Field(None, description="per-kernel profile (GPU); not in the verdict")
    sol: SolReport | None = Field(
        None, description="the problem's floor on this machine and the fraction reached (docs/sol.md)"
    )
    dependencies: Dependencies | None = Field(None, description="what this verdict depends on")
    cached: bool = False
    reevaluated: str | None = Field(
        None, description="why a cached result for the same texts was not reused (what changed since)"
    )
    served_by: int | None = Field(
        None, description="pid of the warm evaluator (stark-mcp eval's daemon) that made this verdict; None: "
        "the caller's own process"
    )

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def score(self) -> float:
        """Median runtime in ms when correct, +infinity otherwise (the paper's s(n))."""
        if self.status is Status.PASSED and self.runtime is not None:
            return self.runtime.median_ms
        return math.inf


class Usage(BaseModel):
    """Tokens and cost of one or more LLM calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            calls=self.calls + other.calls,
        )


class Action(StrEnum):
    """How a node was made: the reference itself, plan+code, or debug of a failing parent."""

    ROOT = "root"
    PLAN = "plan"
    DEBUG = "debug"


class Node(BaseModel):
    """One attempt in a run's tree. The root holds the reference module.

    ``evaluation`` is always the server's own measurement; the root's is the
    reference timed as a candidate (its score is the eager runtime).
    """

    id: str = Field(description="short id, unique within its run: n0 is the root, then n1, n2, ...")
    run_id: str = ""
    parent_id: str | None = None
    seq: int = Field(0, description="creation order within the run; n<seq> is the id")
    action: Action
    plan: str | None = Field(None, description="the plan agent's advice and anchored scaffold")
    source: str
    evaluation: Evaluation | None = None
    usage: Usage = Field(default_factory=Usage)
    adherence: float | None = Field(None, description="share of changed lines inside anchored spans")
    created_at: float = 0.0

    @property
    def status(self) -> Status | None:
        return self.evaluation.status if self.evaluation is not None else None

    @property
    def score(self) -> float:
        return self.evaluation.score if self.evaluation is not None else math.inf

    @property
    def has_bug(self) -> bool:
        """Failed build, load, run or check: selection expands it with debug."""
        return self.evaluation is not None and self.evaluation.status.is_bug


RunStatus = Literal["created", "running", "finished", "interrupted", "failed"]


class RunOwner(BaseModel):
    """Who drives a 'running' run: a process (its pid and start time, on its host) and, in a
    server, the MCP session; a run whose owner is gone is marked 'interrupted'."""

    model_config = ConfigDict(frozen=True)

    pid: int
    started: str = Field(description="the process's start time, in clock ticks since boot (Linux)")
    host: str
    session: str = Field(description="'process', or an MCP session's own id")

# What a run's candidates write their kernels in: CUDA C++ and Triton on a GPU, C++ on the CPU.
KernelLanguage = Literal["cuda", "triton", "cpp"]
LANGUAGES: tuple[str, ...] = ("cuda", "triton", "cpp")


def default_language(device: str) -> KernelLanguage:
    """A run's language when none is asked for: C++ on the CPU, CUDA C++ on a GPU."""
    return "cpp" if device.split(":", 1)[0] == "cpu" else "cuda"


class RunRecord(BaseModel):
    """One optimization of one problem on one device, with everything needed to resume it."""

    id: str = Field(description='short, typeable, unique, e.g. "r-7kq2mz"')
    name: str
    problem: Problem
    device: str = Field(description="cpu or cuda: the device the run was created on (auto resolved)")
    strategy: str = "stark"
    policy: dict[str, Any] = Field(description="the tree PolicyConfig as a dict")
    budget: int = Field(description="attempts allowed, the root not counted")
    seed: int
    config: dict[str, Any] = Field(default_factory=dict)
    baselines: dict[str, TimingStats] = Field(default_factory=dict)
    language: KernelLanguage = Field(
        "cuda", description="what candidates write kernels in (when not given: cpp on the CPU, else cuda)"
    )
    pending_baselines: list[str] = Field(
        default_factory=list, description="baselines still being timed; speedups over them come later"
    )
    status: RunStatus = "created"
    created_at: float
    updated_at: float

    @model_validator(mode="before")
    @classmethod
    def _language_of_device(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("language") is None and isinstance(data.get("device"), str):
            return {**data, "language": default_language(data["device"])}
        return data


class ExchangeRecord(BaseModel):
    """One LLM call as sent and as answered, kept for audit and for ``stark-mcp show``."""

    id: int
    run_id: str
    node_id: str | None = None
    role: str
    model: str
    request: dict[str, Any]
    reply: str
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    created_at: float


class StoredEvaluation(BaseModel):
    """An evaluation made outside the tree (MCP ``evaluate_kernel``) that a node may later reuse."""

    id: str = Field(description='short, typeable, unique, e.g. "e-4w9c1dpx"')
    run_id: str
    source_hash: str
    evaluation: Evaluation
    created_at: float
