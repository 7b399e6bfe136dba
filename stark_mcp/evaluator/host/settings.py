"""EvalSettings: every knob of one evaluation, frozen and hashable into cache keys."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field, field_validator

from stark_mcp.evaluator.common.wire import GPU_SLEEP_CYCLES, GPU_SPIN_S, WorkerSettings

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
    in its settings (``EvalSettings.worker_settings``) and are part of every cache key; the reasons for
    the figures are beside ``GPU_TOLERANCES`` below."""

    model_config = ConfigDict(frozen=True)

    abs_slack_ms: float = Field(ge=0, description="a report this far below the trusted figure is believed")
    rel_slack: float = Field(ge=0, lt=1, description="... or this share of the figure, if larger")
    forged_gap_ms: float = Field(ge=0, description="a report this far below (and below in share) is forged")
    forged_gap_overheads: float = Field(ge=0, description="... past this many harness overheads as well")
    min_blocks: int = Field(ge=1, description="timing blocks per runner at least (CPU: measures the drift)")
    bracket_after_inputs: bool = Field(description="the trusted bracket starts after the inputs are written")


# The timing tolerances travel to the worker with its settings (worker_settings), never from defaults
# there: they change verdicts and times, so they are part of every cache key. Why their figures are
# what they are:
# The slack is what a shaved report could gain, so it is as small as the measurement allows: a
# floor, a share of the figure, and the noise of the overhead estimate (timing.slack_ms). CPU
# brackets are the jail's CPU time read through process clocks; the harness's share of a call
# (waking, publishing the outputs: 0.1-0.2 ms on the 2-core CI machine) differs between the two
# runners by up to ~0.045 ms. GPU brackets are spin-waited wall time with ~0.5 ms of harness a
# call on an H100; honest candidates' reports landed from 18 us below to 34 us above the trusted
# figure there (docs/benchmarks/adversarial.md). The floors are those differences: below them a
# report is believed, so kernels of well under ten times the floor are bounded only loosely.
# The CPU share also grows with what the forward streams through the caches, which leaves the
# harness cold: an honest two-pass variance (three 2 MB temporaries against the reference's
# one) ran its share 0.03-0.16 ms above the reference's, so it is flagged in about one
# evaluation in eight (its figure is then the trusted one). A share wide enough to believe it
# would let any report gain as much (docs/benchmarks/adversarial.md, 26 Nov, evening).
# Past the slack the trusted figure is used whatever the gap; rejecting as forgery needs more: an
# honest Triton candidate made mostly of torch calls was 0.12 ms slower on the GPU's trusted clock
# than in its own events (tests/gpu/test_gpu_triton.py), so on the GPU only a larger gap is a lie.
# On the CPU the two runners' harness shares (0.1-0.7 ms of CPU a call on a 2-core VM) were seen
# 0.12-0.13 ms apart for identical code beside a forward of 0.04 ms (CI rejected such candidates
# under a 0.1 ms floor, twice in one run): the same floor as the GPU's, and past the whole
# calibrated share as well, which grows with the outputs the harness publishes.
# GPU: the bracket starts after our input write and L2 flush (large copies, noisy). A candidate
# could only use that window with a kernel left spinning on the inputs, which the idle probe
# before every baseline block rejects. CPU: the window is CPU time the runner would have to spend.
# CPU: at least this many timing blocks per runner, so the drift between blocks is measured
# (timing.MIN_BATCHES). GPU: blocks stay as long as 20 ms allows; each adds an idle probe.
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

    def worker_settings(self, device: str) -> WorkerSettings:
        """What the trusted worker of ``device`` (``cuda`` or ``cpu``) needs of these settings: the
        one place they are turned into its record (``common/wire.py``). Its fields named as ours
        take our values; the timing tolerances are the device's; on a GPU, runners spin before
        sleeping on a doorbell and launch a short GPU sleep first in a timed call."""
        cuda = device == "cuda"
        ours = {f.name: getattr(self, f.name) for f in dataclasses.fields(WorkerSettings) if f.name in
                type(self).model_fields}  # fmt: skip
        tolerances = (self.gpu_timing if cuda else self.cpu_timing).model_dump()
        return WorkerSettings(
            **ours,
            **tolerances,
            spin_s=GPU_SPIN_S if cuda else 0.0,
            sleep_cycles=GPU_SLEEP_CYCLES if cuda else 0,
        )
