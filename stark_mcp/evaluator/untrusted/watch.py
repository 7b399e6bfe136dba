"""Cheap first filters the harness runs on itself: replaced timing functions, flipped global flags.

They catch naive tampering with a clear message. They are not a defence: a candidate that controls
the process can defeat them, and the worker's own clock and checks decide what counts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch


class FunctionWatch:
    """Identity of the functions this harness relies on, taken before the candidate is imported."""

    def __init__(self) -> None:
        refs: dict[str, Callable[..., Any]] = {
            "time.perf_counter_ns": time.perf_counter_ns,
            "os.write": os.write,
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "torch.cuda.Event.record": torch.cuda.Event.record,
            "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
            "torch.Tensor.copy_": torch.Tensor.copy_,
            "torch.nn.Module.__call__": torch.nn.Module.__call__,
        }
        # Split once: this runs between every two calls, inside the CPU's trusted bracket.
        self.paths = [(name, name.split("."), fn) for name, fn in refs.items()]

    def replaced(self) -> list[str]:
        return [name for name, parts, fn in self.paths if _current(parts) is not fn]


_ROOTS: dict[str, ModuleType] = {"time": time, "os": os, "torch": torch}


def _current(parts: list[str]) -> Any:
    """Resolved from the module down on every check, so a replaced owner (a class swapped for
    another) shows as well as a replaced function."""
    obj: Any = _ROOTS[parts[0]]
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def _read(fn: Callable[[], Any]) -> str:
    try:
        return repr(fn())
    except Exception as exc:  # noqa: BLE001 - a flag this torch build lacks is simply absent
        return f"<unavailable: {type(exc).__name__}>"


class FlagWatch:
    """Global numerics switches; a change is reported (the precision contract judges the numbers)."""

    def __init__(self) -> None:
        self.before = self.snapshot()

    @staticmethod
    def snapshot() -> dict[str, str]:
        b = torch.backends
        flags: dict[str, Callable[[], Any]] = {
            "cuda.matmul.allow_tf32": lambda: b.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": lambda: b.cudnn.allow_tf32,
            "cudnn.benchmark": lambda: b.cudnn.benchmark,
            "float32_matmul_precision": torch.get_float32_matmul_precision,
            "default_dtype": torch.get_default_dtype,
            "num_threads": torch.get_num_threads,
        }
        return {name: _read(fn) for name, fn in flags.items()}

    def changed(self) -> list[str]:
        after = self.snapshot()
        return [
            f"{k}: {self.before[k]} -> {after.get(k)}" for k in self.before if self.before[k] != after.get(k)
        ]
