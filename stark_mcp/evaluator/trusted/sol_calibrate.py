"""Measure a device's peaks: memory bandwidth (a device copy, bytes read plus written), FP32
throughput (a library matmul with TF32 off) and 16-bit tensor-core throughput (a bf16 matmul).

Asked of the trusted worker (no candidate or problem code involved), once per device; the parent
caches the answer (``stark_mcp.sol.calibration``). On a GPU the worker runs it in a process of its
own (``measure``): the libraries a matmul loads into a CUDA context (cuBLAS and its kernels, about
2 GB on an H200) would otherwise stay in the long-lived worker's. On the CPU it measures one
thread, because CPU candidates are timed on one thread. Standard library and torch only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

GPU = {"copy_bytes": 1 << 30, "mm_fp32": 8192, "mm_bf16": 8192, "repeats": 10}
CPU = {"copy_bytes": 64 << 20, "mm_fp32": 1024, "mm_bf16": 0, "repeats": 10}
CPU_CACHE_FALLBACK = 32 << 20


def _best_seconds(fn: Callable[[], Any], device: str, repeats: int) -> float:
    """The fastest of ``repeats`` timed calls after one warm-up: a peak is a best case."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1000.0)
        else:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    return best


def _matmul_flops_per_s(n: int, dtype: torch.dtype, device: str, repeats: int) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    seconds = _best_seconds(lambda: torch.mm(a, b, out=out), device, repeats)
    return 2.0 * n**3 / seconds


def _cpu_cache_bytes() -> int:
    """The largest CPU cache sysfs lists (outputs this small may never reach DRAM in a call)."""
    best = 0
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(root):
            with open(os.path.join(root, entry, "size"), encoding="ascii") as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * scale)
    except (OSError, ValueError):
        return CPU_CACHE_FALLBACK
    return best or CPU_CACHE_FALLBACK


CHILD_TIMEOUT_S = 180.0


# free-form: a ``calibrated`` frame, JSON from the child's stdout until ``wire.Calibrated.from_frame``
def measure(device: str) -> dict[str, Any]:
    """``calibrate`` where the worker asks for it: in this process on the CPU, in a child on a GPU."""
    if not device.startswith("cuda"):
        return calibrate(device)
    done = subprocess.run(
        [sys.executable, "-P", "-m", __name__, device],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"calibration exited {done.returncode}: {done.stderr.strip()[-1200:]}")
    return json.loads(lines[-1])


# free-form: the frame of a ``wire.Calibrated``, which the child prints as JSON (tests read it as a dict)
def calibrate(device: str, sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """The device's measured peaks, as the ``calibrated`` answer frame."""
    cuda = device.startswith("cuda")
    plan = dict(sizes or (GPU if cuda else CPU))
    threads = torch.get_num_threads()
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    started = time.monotonic()
    try:
        if not cuda:
            torch.set_num_threads(1)
        torch.backends.cuda.matmul.allow_tf32 = False  # the precision contract forbids TF32
        torch.backends.cudnn.allow_tf32 = False
        numel = int(plan["copy_bytes"]) // 4
        buffers = [torch.empty(numel, device=device, dtype=torch.float32).fill_(1.0) for _ in range(2)]
        copy_s = _best_seconds(lambda: buffers[1].copy_(buffers[0]), device, int(plan["repeats"]))
        buffers.clear()
        bandwidth = 2.0 * numel * 4 / copy_s
        fp32 = _matmul_flops_per_s(int(plan["mm_fp32"]), torch.float32, device, int(plan["repeats"]))
        tensor = None
        if cuda and int(plan.get("mm_bf16", 0)):
            tensor = _matmul_flops_per_s(int(plan["mm_bf16"]), torch.bfloat16, device, int(plan["repeats"]))
    finally:
        torch.set_num_threads(threads)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    if cuda:
        torch.cuda.empty_cache()
    return {
        "kind": "calibrated",
        "bandwidth_bytes_per_s": bandwidth,
        "fp32_flops_per_s": fp32,
        "tensor_flops_per_s": tensor,
        "threads": 1 if not cuda else None,
        "cache_bytes": _cpu_cache_bytes() if not cuda else None,
        "method": (
            f"copy of {int(plan['copy_bytes']) >> 20} MiB (read+write), fp32 mm {plan['mm_fp32']}^3 TF32 off"
            + (f", bf16 mm {plan['mm_bf16']}^3" if tensor else "")
            + ("" if cuda else ", one thread")
        ),
        "seconds": round(time.monotonic() - started, 3),
    }


if __name__ == "__main__":
    print(json.dumps(calibrate(sys.argv[1])), flush=True)
