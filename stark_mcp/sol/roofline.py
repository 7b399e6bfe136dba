"""The roofline math: a problem's floor on a machine's peaks, and a time's place against it. Pure.

The floor of one input set is ``max(bytes / bandwidth, flops / peak)`` where bytes count every
input and parameter read once and every output written once, and the FLOPs are the reference's
(``evaluator/reference/sol_count.py``). A time below ``output_write_ms`` (the outputs that cannot stay
in the cache, written at ``OUTPUT_MARGIN`` times the measured bandwidth) is physically impossible;
a time below the roofline is possible only by changing the computation. See docs/sol.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stark_mcp.sol.model import Peaks, ShapeFloor, SolReport, SolShape

# Why 1.25 on a GPU: a device copy reaches 85-90% of the datasheet bandwidth (H200: 4.3 of 4.8 TB/s),
# HBM's bandwidth is shared by reads and writes so a write-only stream cannot beat the datasheet, and
# timing noise is a few percent; 1.25x the measured bandwidth is above the datasheet peak of every GPU
# in ``published``. Why 2.5 on the CPU: one thread's copy is bound by its outstanding cache misses and
# also pays a read-for-ownership of the destination that the count leaves out; a write-only stream
# of non-temporal stores can go about twice as fast. Outputs that fit in the last-level cache are left
# out of the floor altogether (they may not reach DRAM before the call ends), so small outputs never
# trip it.
OUTPUT_MARGIN = 1.25
CPU_OUTPUT_MARGIN = 2.5
LOW_PRECISION = {"float16", "bfloat16"}
# Dense TF32 runs at half the 16-bit tensor-core rate on every GPU with both (A100, H100, H200, B200,
# L4, L40S datasheets); only the 16-bit rate is measured.
TF32_SHARE_OF_TENSOR = 0.5


def output_margin(peaks: Peaks) -> float:
    return CPU_OUTPUT_MARGIN if peaks.kind == "cpu" else OUTPUT_MARGIN


def compute_peak_name(counts: dict[str, Any], peaks: Peaks) -> str:
    """``tensor`` when the reference's own products use tensor cores on this device: 16-bit
    matmuls, or float32 ones that torch runs as TF32 on a GPU (cuDNN convolutions under its
    defaults, which the precision contract then allows a candidate too). Otherwise the FP32 peak,
    since a candidate may not round what the reference computes in full FP32."""
    flops = counts.get("flops", {})
    if not peaks.tensor_flops_per_s:
        return "fp32"
    if flops.get("matmul_lowp") and set(counts.get("dtypes", [])) & LOW_PRECISION:
        return "tensor"
    if flops.get("matmul_tf32") and peaks.kind == "cuda":
        return "tensor"
    return "fp32"


def shape_floor(counts: dict[str, Any], peaks: Peaks) -> ShapeFloor:
    """One input set's floor from the reference jail's counts (``sol_count.count_call``)."""
    flops = {str(k): float(v) for k, v in dict(counts.get("flops", {})).items()}
    inputs, params, outputs = (int(counts.get(k, 0)) for k in ("input_bytes", "param_bytes", "output_bytes"))
    bandwidth = peaks.bandwidth_bytes_per_s
    memory_s = (inputs + params + outputs) / bandwidth
    if compute_peak_name(counts, peaks) == "tensor":
        assert peaks.tensor_flops_per_s is not None
        lowp = flops.get("matmul_lowp", 0.0)
        tf32 = flops.get("matmul_tf32", 0.0) if peaks.kind == "cuda" else 0.0
        rest = sum(flops.values()) - lowp - tf32
        tensor_s = lowp / peaks.tensor_flops_per_s + tf32 / (TF32_SHARE_OF_TENSOR * peaks.tensor_flops_per_s)
        # tensor cores and the FP32 pipes run at once: the slower of the two is the bound
        compute_s = max(tensor_s, rest / peaks.fp32_flops_per_s)
    else:
        compute_s = sum(flops.values()) / peaks.fp32_flops_per_s
    beyond_cache = max(0, outputs - peaks.cache_bytes)
    # A calibration slowed by someone else's work on the device must not make honest times
    # "impossible": the impossibility floor never uses less than the datasheet's bandwidth.
    write_bandwidth = max(bandwidth, peaks.published_bandwidth_bytes_per_s or 0.0)
    return ShapeFloor(
        label=str(counts.get("label", "default")),
        input_bytes=inputs,
        param_bytes=params,
        output_bytes=outputs,
        flops=flops,
        flops_by_op={str(k): float(v) for k, v in dict(counts.get("flops_by_op", {})).items()},
        counted_on=str(counts.get("counted_on", "device")),
        memory_ms=memory_s * 1e3,
        compute_ms=compute_s * 1e3,
        floor_ms=max(memory_s, compute_s) * 1e3,
        output_write_ms=beyond_cache / (output_margin(peaks) * write_bandwidth) * 1e3,
        bound="compute" if compute_s > memory_s else "memory",
    )


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def sol_report(
    counts: Sequence[dict[str, Any]], peaks: Peaks, times_ms: dict[str, float] | None = None
) -> SolReport:
    """The report for one evaluation: each input set's floor, and, given the figure of record per
    shape label (``times_ms``), the fraction of the floor it reaches and the floor check."""
    if not counts:
        raise ValueError("no input sets to compute a floor for")
    times = times_ms or {}
    shapes = []
    for entry in counts:
        floor = shape_floor(entry, peaks)
        time = times.get(floor.label)
        fraction = floor.floor_ms / time if time and time > 0 and floor.floor_ms > 0 else None
        shapes.append(SolShape(floor=floor, time_ms=time, fraction=fraction))
    floors = [s.floor.floor_ms for s in shapes]
    floor_ms = _geomean(floors) if all(f > 0 for f in floors) else 0.0
    timed = [s.time_ms for s in shapes if s.time_ms]
    time_ms = _geomean(timed) if len(timed) == len(shapes) else None
    fraction = floor_ms / time_ms if time_ms and floor_ms else None
    bounds = {s.floor.bound for s in shapes}
    return SolReport(
        floor_ms=floor_ms,
        time_ms=time_ms,
        fraction=fraction,
        headroom=(1.0 / fraction) if fraction else None,
        bound=bounds.pop() if len(bounds) == 1 else "mixed",
        compute_peak=compute_peak_name(counts[0], peaks),
        shapes=shapes,
        peaks=peaks,
        margin=output_margin(peaks),
        below_floor=any(
            s.time_ms is not None and s.time_ms < s.floor.output_write_ms for s in shapes
        ),
        beyond_roofline=any(s.time_ms is not None and s.time_ms < s.floor.floor_ms for s in shapes),
    )


def below_floor_message(report: SolReport) -> str:
    """Why a figure of record is impossible: the first shape that beat writing its outputs."""
    for s in report.shapes:
        if s.time_ms is not None and s.time_ms < s.floor.output_write_ms:
            return (
                f"{s.floor.label}: {s.time_ms:.4g} ms is below the {s.floor.output_write_ms:.4g} ms that "
                f"writing its {s.floor.output_bytes} output bytes beyond the "
                f"{report.peaks.cache_bytes >> 20} MiB cache costs at {report.margin}x the "
                f"{report.peaks.source} bandwidth ({report.peaks.bandwidth_bytes_per_s / 1e9:.0f} GB/s)"
            )
    return ""
