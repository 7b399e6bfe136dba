"""A profiled kernel's roofline, and what bounds it (pure; standard library only).

From a kernel's floating-point work, DRAM traffic and time against the device's roofs (read from an
Nsight Compute row by ``profile_parse.device_peaks``): its arithmetic intensity, the roof it sits
under and how close it came to it; and the bound named from its speed-of-light throughputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from stark_mcp.evaluator.common.profile_records import DevicePeaks, Roofline


def roofline(
    flops: Mapping[str, float],
    dram_bytes: float | None,
    time_s: float,
    peaks: DevicePeaks,
    tensor_core: bool = False,
) -> Roofline | None:
    """Arithmetic intensity and achieved vs attainable FLOP/s on the roof of the kernel's dominant
    precision (FP64 at the device's FP32/FP64 ratio, FP16 at twice FP32: an approximation)."""
    total = sum(flops.values())
    if dram_bytes is None or time_s <= 0:
        return None
    fp32, bandwidth = peaks.get("fp32_flops_per_s"), peaks.get("dram_bytes_per_s")
    dominant = max(flops, key=lambda p: flops[p]) if total > 0 else "f"
    peak = fp32
    if fp32 and dominant == "d":
        peak = fp32 / (peaks.get("fp64_ratio") or 2.0)
    elif fp32 and dominant == "h":
        peak = 2.0 * fp32
    intensity = total / dram_bytes if dram_bytes > 0 else None
    achieved = total / time_s
    ridge = peak / bandwidth if peak and bandwidth else None
    attainable = side = fraction = None
    if peak and bandwidth and intensity is not None:
        attainable = min(peak, intensity * bandwidth)
        side = "memory" if intensity < ridge else "compute"
    elif peak and dram_bytes == 0 and total > 0:
        attainable, side = peak, "compute"
    # Below the ridge, achieved / attainable is the share of the DRAM roof the kernel reached, which
    # stays defined for kernels that do no arithmetic at all (copies, transposes).
    if side == "memory" and bandwidth:
        fraction = dram_bytes / time_s / bandwidth
    elif side == "compute" and peak:
        fraction = achieved / peak
    return {
        "flops": total,
        "dram_bytes": dram_bytes,
        "arithmetic_intensity": intensity,
        "achieved_flops_per_s": achieved,
        "peak_flops_per_s": peak,
        "peak_dram_bytes_per_s": bandwidth,
        "ridge_point": ridge,
        "attainable_flops_per_s": attainable,
        "achieved_fraction": fraction,
        "side": side,
        "tensor_core": tensor_core,
    }


def bound(sm_pct: float | None, memory_pct: float | None) -> str | None:
    """What limits a kernel, read from its speed-of-light throughputs the way ncu's rule does:
    one above 60% of peak names the bound; both under 40% means latency (too little parallelism
    or too many dependent waits) rather than bandwidth or math."""
    if sm_pct is None or memory_pct is None:
        return None
    top = max(sm_pct, memory_pct)
    if top >= 60:
        return "compute" if sm_pct >= memory_pct else "memory"
    if top < 40:
        return "latency"
    return "balanced"
