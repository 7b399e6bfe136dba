"""EvalSettings: every knob of one evaluation, frozen and hashable into cache keys."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field, field_validator

BASELINE_NAMES = ("eager", "compile_default", "compile_max_autotune", "compile_max_autotune_no_cudagraphs")
DEFAULT_BASELINES = ("eager", "compile_default", "compile_max_autotune")
TIMING_FIELDS = (
    "warmup_s",
    "min_calls",
    "min_time_s",
    "max_time_s",
    "max_calls",
    "input_sets",
    "cpu_threads",
)
# Steps that run after the verdict and never change it or a time: outside the settings hash, so
# turning them on or off reuses cached results (a cached GPU result without a profile gets one).
ADVISORY_FIELDS = ("profile", "profile_timeout_s", "profile_max_kernels", "sanitize", "sanitize_timeout_s")


class TimingTolerances(BaseModel):
    """How far the trusted worker lets a candidate's own timing report depart from its trusted clock
    (``trusted/timing.py``). They change verdicts and times, so they live here, travel to the worker
    in its settings and are part of every cache key; the reasons for the figures are in
    ``trusted/worker.py`` (``_session_settings``)."""

    model_config = ConfigDict(frozen=True)

    abs_slack_ms: float = Field(ge=0, description="a report this far below the trusted figure is believed")
    rel_slack: float = Field(ge=0, lt=1, description="... or this share of the figure, if larger")
    forged_gap_ms: float = Field(ge=0, description="a report this far below (and below in share) is forged")
    forged_gap_overheads: float = Field(ge=0, description="... past this many harness overheads as well")
    min_blocks: int = Field(ge=1, description="timing blocks per runner at least (CPU: measures the drift)")
    bracket_after_inputs: bool = Field(description="the trusted bracket starts after the inputs are written")


GPU_TOLERANCES = TimingTolerances(
    abs_slack_ms=0.04, rel_slack=0.05, forged_gap_ms=0.25, forged_gap_overheads=0.0, min_blocks=1,
    bracket_after_inputs=True,
)  # fmt: skip
CPU_TOLERANCES = TimingTolerances(
    abs_slack_ms=0.05, rel_slack=0.15, forged_gap_ms=0.25, forged_gap_overheads=1.0, min_blocks=4,
    bracket_after_inputs=False,
)  # fmt: skip


class EvalSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    trials: int = Field(5, ge=1, description="correctness trials, each with a fresh secret seed")
    build_timeout_s: float = Field(600.0, gt=0)
    load_timeout_s: float = Field(120.0, gt=0)
    correctness_timeout_s: float = Field(120.0, gt=0)
    timing_timeout_s: float = Field(180.0, gt=0)
    baseline_timeout_s: float = Field(900.0, gt=0)
    warmup_s: float = Field(0.05, ge=0)
    min_calls: int = Field(30, ge=1)
    min_time_s: float = Field(0.1, ge=0)
    max_time_s: float = Field(2.0, gt=0)
    max_calls: int = Field(1000, ge=3)
    input_sets: int = Field(3, ge=1, description="secret-seeded input sets rotated while timing")
    cpu_threads: int = Field(1, ge=0, description="intra-op threads for CPU evaluations; 0 = torch's default")
    baselines: tuple[str, ...] = DEFAULT_BASELINES
    check_rate: float = Field(0.1, ge=0, le=1, description="share of timed calls secretly checked")
    min_timed_checks: int = Field(3, ge=1, description="timed calls checked at least, at random positions")
    tolerance_factor: float = Field(8.0, gt=0)
    tolerance_floor: float = Field(1e-5, ge=0)
    fallback_tolerance: float = Field(1e-4, gt=0)
    min_own_kernel_share: float = Field(0.5, ge=0, le=1)
    compare_in_place_bytes: int = Field(
        1 << 30, ge=0, description="outputs this large are compared in place (runner frozen), not copied"
    )
    jail_memory_bytes: int = Field(
        0,
        ge=0,
        description="memory one jail's processes may hold, shared memory and tmpfs files included "
        "(cgroup memory.max; past it: runtime_error (resource)); 0: half the machine's memory",
    )
    implausible_speedup: float = Field(10.0, gt=1)
    gpu_timing: TimingTolerances = Field(GPU_TOLERANCES, description="timing tolerances on a GPU")
    cpu_timing: TimingTolerances = Field(CPU_TOLERANCES, description="timing tolerances on the CPU")
    profile: bool = Field(
        True,
        description="GPU: profile the kernels of every passing candidate (ncu, else "
        "the torch profiler's kernel list)",
    )
    profile_timeout_s: float = Field(90.0, gt=0, description="one profile run, tool start and report in")
    profile_max_kernels: int = Field(40, ge=1, le=1000, description="kernel launches Nsight Compute replays")
    sanitize: bool = Field(
        True, description="GPU: run compute-sanitizer memcheck on candidates that fail with a memory error"
    )
    sanitize_timeout_s: float = Field(120.0, gt=0)

    @field_validator("baselines")
    @classmethod
    def _known_baselines(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [b for b in value if b not in BASELINE_NAMES]
        if unknown:
            raise ValueError(f"unknown baseline(s) {unknown}; choose from {list(BASELINE_NAMES)}")
        return tuple(dict.fromkeys(value))

    def _digest(self, fields: tuple[str, ...] | None = None) -> str:
        data = self.model_dump(mode="json")
        if fields is not None:
            data = {k: data[k] for k in fields}
        else:
            data = {k: v for k, v in data.items() if k not in ADVISORY_FIELDS}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def settings_hash(self) -> str:
        """Covers every field that can change a verdict or a time: a cached result is reused only
        under identical settings (the advisory steps after the verdict are left out)."""
        return self._digest()

    @property
    def timing_hash(self) -> str:
        """Covers only what changes a baseline's timing."""
        return self._digest(TIMING_FIELDS)

    def device_env(self, device: str) -> dict[str, str]:
        """Environment every child on ``device`` gets. One CPU thread by default: on a shared or small
        machine, multi-threaded CPU timings swing by orders of magnitude with the load."""
        if device == "cpu" and self.cpu_threads > 0:
            return {"OMP_NUM_THREADS": str(self.cpu_threads), "MKL_NUM_THREADS": str(self.cpu_threads)}
        return {}

    def timing_spec(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in TIMING_FIELDS}

    def worker_dict(self) -> dict[str, object]:
        """What the trusted worker needs of these settings (plain JSON)."""
        return self.model_dump(mode="json")
