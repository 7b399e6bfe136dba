"""The one timer for candidates and baselines (CUDA events with device sync, or perf_counter_ns)."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch


class Timer:
    """Times ``fn(*inputs)`` per call; functions are bound at construction, before candidate code."""

    def __init__(self, device: str, settings: dict[str, Any]) -> None:
        self.device = device
        self.warmup_ns = int(float(settings["warmup_s"]) * 1e9)
        self.min_calls = int(settings["min_calls"])
        self.min_time_ns = int(float(settings["min_time_s"]) * 1e9)
        self.max_time_ns = int(float(settings["max_time_s"]) * 1e9)
        self.max_calls = int(settings["max_calls"])
        self.clock = time.perf_counter_ns
        self.flush: torch.Tensor | None = None
        if device == "cuda":
            self.sync = torch.cuda.synchronize
            self.event = torch.cuda.Event
            self.record = torch.cuda.Event.record
            self.elapsed = torch.cuda.Event.elapsed_time
            l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
            nbytes = max(2 * l2, 64 << 20)
            self.flush = torch.empty(nbytes // 4, dtype=torch.int32, device="cuda")

    def _call(self, fn: Callable[..., Any], args: list[Any]) -> None:
        out = fn(*args)
        del out

    def _timed_call(self, fn: Callable[..., Any], args: list[Any]) -> Any:
        if self.device == "cuda":
            assert self.flush is not None
            start, end = self.event(enable_timing=True), self.event(enable_timing=True)
            self.flush.zero_()
            self.record(start)
            self._call(fn, args)
            self.sync()  # device-wide: work left on side streams is counted
            self.record(end)
            return (start, end)
        t0 = self.clock()
        self._call(fn, args)
        return self.clock() - t0

    def run(self, fn: Callable[..., Any], input_sets: list[list[Any]]) -> dict[str, Any]:
        k = len(input_sets)
        start = self.clock()
        warm = 0
        while warm < 1 or self.clock() - start < self.warmup_ns:
            self._call(fn, input_sets[warm % k])
            if self.device == "cuda":
                self.sync()
            warm += 1
        raw: list[Any] = []
        t0 = self.clock()
        while True:
            raw.append(self._timed_call(fn, input_sets[len(raw) % k]))
            n, spent = len(raw), self.clock() - t0
            if n >= self.max_calls:
                break
            if n >= self.min_calls and spent >= self.min_time_ns:
                break
            if n >= 3 and spent >= self.max_time_ns:
                break
        wall_ns = self.clock() - t0
        if self.device == "cuda":
            self.sync()
            samples = [float(self.elapsed(s, e)) for s, e in raw]
        else:
            samples = [ns / 1e6 for ns in raw]
        return {"samples_ms": samples, "warmup_calls": warm, "wall_ms": wall_ns / 1e6}
