"""The runner's own kernel list from the torch profiler (pure; standard library only).

Runs inside the candidate's process, so what it reports is honest feedback at best: the worker
uses it for the own-kernel share and, when Nsight Compute cannot read counters, as the profile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from stark_mcp.evaluator.common.runner_wire import Launch

MAX_KERNELS = 48
MAX_LAUNCHES = 64
MAX_NAME = 200


def kernel_totals(events: Iterable[tuple[str, str, float]]) -> list[list[Any]]:
    """``(name, device type, device time in us)`` per profiler event -> ``[[name, us], ...]`` for the
    device's kernels, summed per name, slowest first."""
    totals: dict[str, float] = {}
    for name, device_type, us in events:
        if device_type.rsplit(".", 1)[-1] != "CUDA" or not math.isfinite(us):
            continue
        key = name[:MAX_NAME]
        totals[key] = totals.get(key, 0.0) + us
    top = sorted(totals.items(), key=lambda kv: -kv[1])[:MAX_KERNELS]
    return [[name, us] for name, us in top]


# free-form: ``trace`` is the torch profiler's Chrome trace JSON, as torch wrote it
def launches_from_trace(trace: dict[str, Any]) -> list[Launch]:
    """Kernel launches of a Chrome trace as the torch profiler exports it: the ``X`` events of
    category ``kernel``, with ``dur`` in us and the launch shape in ``args``."""
    launches: list[Launch] = []
    for event in trace.get("traceEvents", []):
        if not isinstance(event, dict) or event.get("cat") != "kernel" or event.get("ph") != "X":
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        launches.append(
            {
                "name": str(event.get("name", "?"))[:MAX_NAME],
                "us": float(event.get("dur") or 0.0),
                "grid": _dims(args.get("grid")),
                "block": _dims(args.get("block")),
                "registers": _count(args.get("registers per thread")),
                "shared_memory": _count(args.get("shared memory")),
            }
        )
    launches.sort(key=lambda launch: -launch["us"])
    return launches[:MAX_LAUNCHES]


def _dims(value: Any) -> list[int] | None:
    if isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) for v in value):
        return value
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
