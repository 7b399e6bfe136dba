"""In-process guards around candidate code: flags, function identity, inputs, allocator poison."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import torch


def _read(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # a flag this torch build lacks is simply absent
        return f"<unavailable: {type(exc).__name__}>"


def snapshot_flags() -> dict[str, str]:
    """Global numerics switches a candidate could flip to gain speed or slow the baseline."""
    b = torch.backends
    flags: dict[str, Callable[[], Any]] = {
        "cuda.matmul.allow_tf32": lambda: b.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cudnn.allow_tf32": lambda: b.cudnn.allow_tf32,
        "cudnn.benchmark": lambda: b.cudnn.benchmark,
        "cudnn.deterministic": lambda: b.cudnn.deterministic,
        "cudnn.enabled": lambda: b.cudnn.enabled,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "default_dtype": torch.get_default_dtype,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "grad_enabled": torch.is_grad_enabled,
        "num_threads": torch.get_num_threads,
    }
    return {name: repr(_read(fn)) for name, fn in flags.items()}


def flag_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return [f"{k}: {before[k]} -> {after.get(k)}" for k in before if before[k] != after.get(k)]


def capture_functions() -> dict[str, Any]:
    """References to everything the harness trusts, taken before the candidate is imported."""
    refs: dict[str, Any] = {
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.perf_counter": time.perf_counter,
        "os.write": os.write,
        "torch.save": torch.save,
        "torch.Tensor.clone": torch.Tensor.clone,
        "torch.equal": torch.equal,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "torch.nn.Module.__call__": torch.nn.Module.__call__,
    }
    return refs


def _current(name: str) -> Any:
    owner_path, _, attr = name.rpartition(".")
    parts = owner_path.split(".")
    obj: Any = {"time": time, "os": os, "torch": torch}[parts[0]]
    for part in parts[1:]:
        obj = getattr(obj, part)
    return getattr(obj, attr)


def tampered(refs: dict[str, Any]) -> list[str]:
    return [name for name, fn in refs.items() if _current(name) is not fn]


def clone_tree(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, (list, tuple)):
        return type(obj)(clone_tree(x) for x in obj)
    return obj


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def mutated_inputs(current: list[Any], pristine: list[Any]) -> list[int]:
    """Positions of forward arguments whose tensors no longer equal their pristine clones."""
    changed = []
    for i, (cur, orig) in enumerate(zip(current, pristine)):
        pairs = list(zip(cur, orig)) if isinstance(cur, (list, tuple)) else [(cur, orig)]
        for c, o in pairs:
            if isinstance(c, torch.Tensor) and not _same(c.detach(), o):
                changed.append(i)
                break
    return changed


def _storages(obj: Any) -> list[int]:
    if type(obj) is torch.Tensor:
        return [obj.untyped_storage().data_ptr()] if obj.numel() else []
    if isinstance(obj, (list, tuple)):
        return [p for x in obj for p in _storages(x)]
    return []


def aliases_input(output: Any, inputs: list[Any]) -> bool:
    return bool(set(_storages(output)) & set(_storages(list(inputs))))


def poison_cuda_allocator(fraction: float = 0.25, cap_bytes: int = 2 << 30) -> None:
    """Leave the caching allocator's free blocks full of 0xFF (NaN in every float dtype).

    A do-nothing ``torch::empty`` output then reads as NaN instead of whatever a previous
    computation left behind.
    """
    free, _total = torch.cuda.mem_get_info()
    budget = min(int(free * fraction), cap_bytes)
    blocks = []
    size = 512 << 20
    while size >= (1 << 20) and budget > 0:
        if size <= budget:
            t = torch.empty(size, dtype=torch.uint8, device="cuda")
            t.fill_(255)
            blocks.append(t)
            budget -= size
        size //= 2
    for _ in range(16):  # small-pool segments (allocations under 1 MiB come from 2 MiB segments)
        t = torch.empty(1 << 19, dtype=torch.uint8, device="cuda")
        t.fill_(255)
        blocks.append(t)
    torch.cuda.synchronize()
    del blocks
