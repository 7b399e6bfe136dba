"""The shapes of a parsed profile (standard library only): what ``profile_parse`` and
``kernel_roofline`` return, as ``TypedDict``s. They stay plain dicts at run time, because the parent
side validates them into ``records.KernelProfile`` and friends as they are; the keys are those
records' fields."""

from __future__ import annotations

from typing import TypedDict

# A raw Nsight Compute row: one column per metric, in its base unit, and the name columns as text.
NcuRow = dict[str, float | str | None]


class DevicePeaks(TypedDict):
    """The GPU's name and roofs, read from one Nsight Compute row."""

    device_name: str
    fp32_flops_per_s: float | None
    dram_bytes_per_s: float | None
    fp64_ratio: float | None


class Roofline(TypedDict):
    """Where one kernel sits under its dominant precision's roof (``records.Roofline``)."""

    flops: float
    dram_bytes: float
    arithmetic_intensity: float | None
    achieved_flops_per_s: float
    peak_flops_per_s: float | None
    peak_dram_bytes_per_s: float | None
    ridge_point: float | None
    attainable_flops_per_s: float | None
    achieved_fraction: float | None
    side: str | None  # memory, compute, or None when a roof is unknown
    tensor_core: bool


class Launch(TypedDict, total=False):
    """One profiled launch, or the launches of one kernel and launch shape merged (``launches`` set).
    The torch profiler gives the first six fields only; Nsight Compute all of them."""

    name: str
    time_ns: float
    grid: list[int] | None
    block: list[int] | None
    registers_per_thread: int | None
    shared_memory_bytes: int | None
    theoretical_occupancy_pct: float | None
    achieved_occupancy_pct: float | None
    dram_throughput_pct: float | None
    memory_throughput_pct: float | None
    sm_throughput_pct: float | None
    l1_hit_rate_pct: float | None
    l2_hit_rate_pct: float | None
    stall_weights: dict[str, float]  # stall reason -> its ratio (weighted by time once merged)
    flops: dict[str, float]  # precision (d, f, h) -> floating-point operations
    dram_bytes: float | None
    tensor_instructions: float
    launches: int


class StallShare(TypedDict):
    reason: str
    share: float  # of all the kernel's stall weight, 0..1


class KernelEntry(TypedDict):
    """One kernel of the profiled forward as the parent reads it (``records.KernelProfile``)."""

    name: str
    short_name: str
    launches: int
    time_us: float
    share: float
    grid: list[int] | None
    block: list[int] | None
    registers_per_thread: int | None
    shared_memory_bytes: int | None
    theoretical_occupancy_pct: float | None
    achieved_occupancy_pct: float | None
    dram_throughput_pct: float | None
    memory_throughput_pct: float | None
    sm_throughput_pct: float | None
    l1_hit_rate_pct: float | None
    l2_hit_rate_pct: float | None
    stalls: list[StallShare]
    roofline: Roofline | None
    bound: str | None


class TorchKernels(TypedDict):
    """The torch profiler's kernel list, merged and sorted slowest first."""

    kernels: list[KernelEntry]
    total_time_us: float


class NcuKernels(TorchKernels):
    """A whole Nsight Compute report: its kernels, the device and ncu's own messages."""

    device_name: str
    messages: list[str]
    peaks: DevicePeaks
