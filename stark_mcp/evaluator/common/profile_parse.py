"""Profiler output to per-kernel facts, and the roofline (pure; standard library only).

Two sources, one shape of result (``profile_records``: plain dicts with the fields of
``records.KernelProfile``; the roofline itself is ``kernel_roofline.py``):

- Nsight Compute's ``--csv --page raw`` report (``parse_ncu_raw``): one row per profiled launch,
  one column per metric, after a header row and a units row, with ``==PROF==``/``==ERROR==``
  lines around it. ``METRICS`` is the fixed set we ask for; the parser reads nothing else.
- the torch profiler's kernel list (``kernels_from_torch``): names, device times and, when the
  trace had them, launch shapes. No counters.

The text comes from a process the candidate controls (the profiler runs inside its jail), so it
is read as untrusted data: sizes capped, numbers checked finite, names cut. A forged profile can
only mislead the candidate's own planner; it never reaches a verdict or a time.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable
from typing import Any

from stark_mcp.evaluator.common.kernel_names import base_name
from stark_mcp.evaluator.common.kernel_roofline import bound, roofline
from stark_mcp.evaluator.common.profile_records import (
    DevicePeaks,
    KernelEntry,
    Launch,
    NcuKernels,
    NcuRow,
    Roofline,
    StallShare,
    TorchKernels,
)

STALL_PREFIX = "smsp__average_warp_latency_issue_stalled_"
STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
# "selected" is a warp issuing, not waiting: it is kept out of the stall shares.
NOT_A_STALL = frozenset({"selected"})
_FP_OPS = tuple(
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for p in "dfh" for op in ("add", "mul", "fma")
)

# The fixed metric set (names recorded on an H100 with ncu 2025; see tests/fixtures/profiles).
METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__bytes.sum",
    "dram__bytes.sum.peak_sustained",
    "dram__cycles_elapsed.avg.per_second",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__cycles_elapsed.avg.per_second",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "sm__inst_executed_pipe_tensor.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__waves_per_multiprocessor",
    "device__attribute_display_name",
    "device__attribute_multiprocessor_count",
    "device__attribute_clock_rate",
    "device__attribute_memory_clock_rate",
    "device__attribute_global_memory_bus_width",
    "device__attribute_compute_capability_major",
    "device__attribute_compute_capability_minor",
    "device__attribute_single_to_double_precision_perf_ratio",
    *_FP_OPS,
    *(f"{STALL_PREFIX}{r}.ratio" for r in STALL_REASONS),
)

MAX_ROWS = 512  # launches read from one report
# The smallest MMA (m8n8k4) does 512 FLOPs per warp instruction: tensor-core instructions that could
# carry a tenth of the counted arithmetic make the kernel a tensor-core kernel, whose FLOPs we miss.
TENSOR_FLOPS_PER_INSTRUCTION = 512
MAX_NAME = 300
TOP_STALLS = 3
# FP32 lanes per SM by compute capability (major, minor): the compute roof when ncu gives no peak.
FP32_LANES = {(7, 0): 64, (7, 5): 64, (8, 0): 64}
FP32_LANES_DEFAULT = 128  # 8.6, 8.7, 8.9, 9.0, 10.x, 12.x
_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "k": 1e3, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_TIME_TO_NS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}


class ProfileParseError(ValueError):
    """The profiler's output holds no usable kernel rows; the message says what it said instead."""


# ---- numbers -------------------------------------------------------------------------------------


def number(text: str | None) -> float | None:
    """``"19,710,368"`` -> 19710368.0; empty, ``n/a`` and non-finite values -> None."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _scaled(value: float | None, unit: str) -> float | None:
    """A value in its metric's base unit (ns, byte, hz) whatever prefix ncu printed it with."""
    if value is None:
        return None
    unit = unit.strip()
    if unit in _TIME_TO_NS:
        return value * _TIME_TO_NS[unit]
    for base in ("byte/second", "byte/s", "byte", "hz", "Hz"):
        if unit.endswith(base) and unit[: -len(base)] in _SI:
            return value * _SI[unit[: -len(base)]]
    return value


def _triple(text: str | None) -> list[int] | None:
    """``"(128, 1, 1)"`` -> [128, 1, 1]."""
    if not text:
        return None
    parts = re.findall(r"\d+", text)
    if len(parts) != 3:
        return None
    values = [int(p) for p in parts]
    return values if all(0 < v < 1 << 31 for v in values) else None


# ---- Nsight Compute ------------------------------------------------------------------------------


def parse_ncu_raw(text: str) -> tuple[list[NcuRow], list[str]]:
    """The rows of a ``--csv --page raw`` report, each metric in its base unit, and ncu's own
    messages (``==ERROR==``, ``==WARNING==`` lines). ProfileParseError when there is no row."""
    messages: list[str] = []
    table: list[str] = []
    for line in text.splitlines():
        if line.startswith("=="):
            if line.startswith(("==ERROR==", "==WARNING==")):
                messages.append(line[:500])
        elif line.strip():
            table.append(line)
    rows = list(csv.reader(io.StringIO("\n".join(table))))
    if len(rows) < 3 or "Kernel Name" not in rows[0]:
        said = "; ".join(m for m in messages if "unmodified GPU clocks" not in m)
        raise ProfileParseError(said or "the report holds no kernel rows")
    header = rows[0]
    units = rows[1] if len(rows[1]) == len(header) else [""] * len(header)
    out: list[NcuRow] = []
    for row in rows[2 : 2 + MAX_ROWS]:
        if len(row) != len(header):
            continue
        record: NcuRow = {}
        for name, unit, value in zip(header, units, row, strict=True):
            if name in ("Kernel Name", "Block Size", "Grid Size", "device__attribute_display_name"):
                record[name] = value[:MAX_NAME]
            elif name == "ID" or name in METRICS:
                record[name] = _scaled(number(value), unit)
        out.append(record)
    if not out:
        raise ProfileParseError("the report's rows do not match its header")
    return out, messages


def device_peaks(row: NcuRow) -> DevicePeaks:
    """The GPU's name and roofs from one row: FP32 FLOP/s, DRAM bytes/s, and the FP64 ratio."""
    sm_hz = _get(row, "sm__cycles_elapsed.avg.per_second")
    if sm_hz is None and _get(row, "device__attribute_clock_rate") is not None:
        sm_hz = _get(row, "device__attribute_clock_rate") * 1e3  # kHz
    ffma_per_cycle = _get(row, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained")
    if ffma_per_cycle is None:
        sms = _get(row, "device__attribute_multiprocessor_count")
        major = _get(row, "device__attribute_compute_capability_major")
        minor = _get(row, "device__attribute_compute_capability_minor")
        if sms is not None and major is not None:
            lanes = FP32_LANES.get((int(major), int(minor or 0)), FP32_LANES_DEFAULT)
            ffma_per_cycle = sms * lanes
    fp32 = 2.0 * ffma_per_cycle * sm_hz if ffma_per_cycle and sm_hz else None
    dram_hz = _get(row, "dram__cycles_elapsed.avg.per_second")
    bytes_per_cycle = _get(row, "dram__bytes.sum.peak_sustained")
    if bytes_per_cycle and dram_hz:
        bandwidth = bytes_per_cycle * dram_hz
    else:
        mem_khz = _get(row, "device__attribute_memory_clock_rate")
        width = _get(row, "device__attribute_global_memory_bus_width")
        bandwidth = 2.0 * mem_khz * 1e3 * width / 8.0 if mem_khz and width else None  # double data rate
    name = row.get("device__attribute_display_name")
    return {
        "device_name": name if isinstance(name, str) else "",
        "fp32_flops_per_s": fp32,
        "dram_bytes_per_s": bandwidth,
        "fp64_ratio": _get(row, "device__attribute_single_to_double_precision_perf_ratio"),
    }


def launch_from_ncu(row: NcuRow) -> Launch:
    """One profiled launch: the fields of ``KernelProfile`` plus the raw work it did."""
    name = str(row.get("Kernel Name") or "?")
    static = _get(row, "launch__shared_mem_per_block_static")
    dynamic = _get(row, "launch__shared_mem_per_block_dynamic")
    ops = {p: _ops(row, p) for p in "dfh"}
    stalls = {r: _get(row, f"{STALL_PREFIX}{r}.ratio") for r in STALL_REASONS}
    return {
        "name": name,
        "time_ns": _get(row, "gpu__time_duration.sum") or 0.0,
        "grid": _triple(row.get("Grid Size")),
        "block": _triple(row.get("Block Size")),
        "registers_per_thread": _int(_get(row, "launch__registers_per_thread")),
        "shared_memory_bytes": None
        if static is None and dynamic is None
        else _int((static or 0) + (dynamic or 0)),
        "theoretical_occupancy_pct": _get(row, "sm__maximum_warps_per_active_cycle_pct"),
        "achieved_occupancy_pct": _get(row, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        "dram_throughput_pct": _get(row, "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        "memory_throughput_pct": _get(
            row, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
        ),
        "sm_throughput_pct": _get(row, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        "l1_hit_rate_pct": _get(row, "l1tex__t_sector_hit_rate.pct"),
        "l2_hit_rate_pct": _get(row, "lts__t_sector_hit_rate.pct"),
        "stall_weights": {r: v for r, v in stalls.items() if v and r not in NOT_A_STALL},
        "flops": ops,
        "dram_bytes": _get(row, "dram__bytes.sum"),
        "tensor_instructions": _get(row, "sm__inst_executed_pipe_tensor.sum") or 0.0,
    }


def _ops(row: NcuRow, precision: str) -> float:
    p = f"smsp__sass_thread_inst_executed_op_{precision}"
    return sum(
        (_get(row, f"{p}{op}_pred_on.sum") or 0.0) * (2.0 if op == "fma" else 1.0)
        for op in ("add", "mul", "fma")
    )


def kernels_from_ncu(text: str) -> NcuKernels:
    """A whole report: the device, its kernels merged by (name, grid, block) and sorted slowest
    first, each with its share and roofline, and ncu's own messages."""
    rows, messages = parse_ncu_raw(text)
    peaks = device_peaks(rows[0])
    launches = [launch_from_ncu(r) for r in rows]
    kernels = merge_launches(launches)
    total = sum(k["time_ns"] for k in kernels)
    out = []
    for k in kernels:
        time_s = k["time_ns"] / 1e9
        tensor = k["tensor_instructions"] * TENSOR_FLOPS_PER_INSTRUCTION > 0.1 * sum(k["flops"].values())
        out.append(_public(k, total, roofline(k["flops"], k["dram_bytes"], time_s, peaks, tensor)))
    return {
        "device_name": peaks["device_name"],
        "kernels": out,
        "messages": messages,
        "total_time_us": total / 1e3,
        "peaks": peaks,
    }


def merge_launches(launches: Iterable[Launch]) -> list[Launch]:
    """Launches of one kernel with one launch shape become one entry: times, work and bytes add up,
    rates and percentages are averaged weighted by time."""
    merged: dict[tuple[Any, ...], Launch] = {}
    sums: dict[tuple[Any, ...], dict[str, list[float]]] = {}  # weighted field -> [sum, weight]
    for launch in launches:
        key = (launch["name"], tuple(launch.get("grid") or ()), tuple(launch.get("block") or ()))
        w = max(launch["time_ns"], 1e-9)
        entry = merged.get(key)
        if entry is None:
            entry = merged[key] = {
                **launch,
                "launches": 0,
                "time_ns": 0.0,
                "stall_weights": {},
                "flops": {p: 0.0 for p in "dfh"},
                "dram_bytes": None,
                "tensor_instructions": 0.0,
            }
            sums[key] = {f: [0.0, 0.0] for f in WEIGHTED}
        entry["launches"] += 1
        entry["time_ns"] += launch["time_ns"]
        for f in WEIGHTED:
            value = launch.get(f)
            if value is not None:
                sums[key][f][0] += value * w
                sums[key][f][1] += w
        for reason, value in (launch.get("stall_weights") or {}).items():
            entry["stall_weights"][reason] = entry["stall_weights"].get(reason, 0.0) + value * w
        for p, value in (launch.get("flops") or {}).items():
            entry["flops"][p] += value
        dram_bytes = launch.get("dram_bytes")
        if dram_bytes is not None:
            entry["dram_bytes"] = (entry["dram_bytes"] or 0.0) + dram_bytes
        entry["tensor_instructions"] += launch.get("tensor_instructions") or 0.0
    for key, entry in merged.items():
        for f, (total, weight) in sums[key].items():
            entry[f] = total / weight if weight else None
    return sorted(merged.values(), key=lambda e: -e["time_ns"])


# Rates and percentages: a merged kernel's is its launches' average, weighted by their time.
WEIGHTED = (
    "theoretical_occupancy_pct",
    "achieved_occupancy_pct",
    "dram_throughput_pct",
    "memory_throughput_pct",
    "sm_throughput_pct",
    "l1_hit_rate_pct",
    "l2_hit_rate_pct",
)


def _public(k: Launch, total_ns: float, roof: Roofline | None) -> KernelEntry:
    weights = k.get("stall_weights") or {}
    stalled = sum(weights.values())
    stalls: list[StallShare] = (
        [
            {"reason": r, "share": v / stalled}
            for r, v in sorted(weights.items(), key=lambda kv: -kv[1])[:TOP_STALLS]
        ]
        if stalled > 0
        else []
    )
    return {
        "name": k["name"][:MAX_NAME],
        "short_name": base_name(k["name"])[:MAX_NAME],
        "launches": k["launches"],
        "time_us": k["time_ns"] / 1e3,
        "share": k["time_ns"] / total_ns if total_ns > 0 else 0.0,
        "grid": k.get("grid"),
        "block": k.get("block"),
        "registers_per_thread": k.get("registers_per_thread"),
        "shared_memory_bytes": k.get("shared_memory_bytes"),
        "theoretical_occupancy_pct": k.get("theoretical_occupancy_pct"),
        "achieved_occupancy_pct": k.get("achieved_occupancy_pct"),
        "dram_throughput_pct": k.get("dram_throughput_pct"),
        "memory_throughput_pct": k.get("memory_throughput_pct"),
        "sm_throughput_pct": k.get("sm_throughput_pct"),
        "l1_hit_rate_pct": k.get("l1_hit_rate_pct"),
        "l2_hit_rate_pct": k.get("l2_hit_rate_pct"),
        "stalls": stalls,
        "roofline": roof,
        "bound": bound(
            k.get("sm_throughput_pct"), k.get("memory_throughput_pct") or k.get("dram_throughput_pct")
        ),
    }


# ---- the torch profiler --------------------------------------------------------------------------


def kernels_from_torch(launches: Iterable[Any]) -> TorchKernels:
    """The fallback: the runner's torch-profiler launches (``{"name", "us", "grid", "block",
    "registers", "shared_memory"}``, or the older ``[name, us]`` pairs), merged and sorted."""
    parsed: list[Launch] = []
    for item in list(launches)[:MAX_ROWS]:
        if isinstance(item, (list, tuple)) and len(item) == 2:
            item = {"name": item[0], "us": item[1]}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        us = item.get("us")
        if not isinstance(us, (int, float)) or not math.isfinite(us) or us < 0:
            continue
        parsed.append(
            {
                "name": item["name"][:MAX_NAME],
                "time_ns": float(us) * 1e3,
                "grid": _list3(item.get("grid")),
                "block": _list3(item.get("block")),
                "registers_per_thread": _int(item.get("registers")),
                "shared_memory_bytes": _int(item.get("shared_memory")),
            }
        )
    kernels = merge_launches(parsed)
    total = sum(k["time_ns"] for k in kernels)
    return {"kernels": [_public(k, total, None) for k in kernels], "total_time_us": total / 1e3}


def _list3(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(isinstance(v, int) for v in value):
        return list(value) if all(0 < v < 1 << 31 for v in value) else None
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value) if 0 <= value < 1 << 40 else None


def _get(row: NcuRow, name: str) -> float | None:
    value = row.get(name)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
