"""The one timer for candidates and baselines (CUDA events, or perf_counter_ns on the CPU).

GPU calls are bracketed by events on the current stream, then checked for hidden work:

    flush L2 | start | fn(*args) | end | (host waits for end) | torch.cuda.synchronize() | after

The per-call time is ``start -> end``: what fn queued on the current stream. Once the host has
seen ``end`` complete, a device-wide synchronize returns at once unless work queued on another
stream is still running; the host time that synchronize takes is the hidden remainder. If its
median exceeds the synchronize's idle cost (calibrated in this process) by more than
max(5 us, 5% of the median), the run is flagged ``unjoined_stream`` and every call is charged
up to ``after`` instead. Host wake-up latency cannot trigger the flag: it is spent before the
measured synchronize starts, which matters because builds load the CPU while timing runs.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

# Warm-up continues past warmup_s, up to this many times it, until the per-call time
# stops falling: clocks ramp from idle over ~0.1 s and a cold first block skews medians.
_MAX_WARMUP_FACTOR = 8
_CALIBRATION_CALLS = 50
# Hidden work: a post-`end` synchronize this much slower than on an idle device.
_TAIL_SLACK_MS = 0.005
_TAIL_SLACK_SHARE = 0.05


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
        self.sync_latency_ms = 0.0  # GPU time between two events around an idle sync
        self.idle_sync_ms = 0.0  # host time of a synchronize on an idle device
        if device == "cuda":
            self.sync = torch.cuda.synchronize
            self.event = torch.cuda.Event
            self.record = torch.cuda.Event.record
            self.elapsed = torch.cuda.Event.elapsed_time
            self.wait_event = torch.cuda.Event.synchronize
            l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
            nbytes = max(2 * l2, 64 << 20)
            self.flush = torch.empty(nbytes // 4, dtype=torch.int32, device="cuda")
            # Events are created up front: creating them inside the loop adds host work
            # between calls and lets the GPU idle.
            self.pool = [self.event(enable_timing=True) for _ in range(3 * self.max_calls)]
            self.sync_latency_ms = self._calibrate_sync()

    def _calibrate_sync(self) -> float:
        a, b = self.pool[0], self.pool[1]
        gpu, host = [], []
        for _ in range(_CALIBRATION_CALLS):
            self.sync()
            self.record(a)
            self.wait_event(a)
            t0 = self.clock()
            self.sync()
            host.append((self.clock() - t0) / 1e6)
            self.record(b)
            self.sync()
            gpu.append(float(self.elapsed(a, b)))
        self.idle_sync_ms = statistics.median(host)
        return statistics.median(gpu)

    def _call(self, fn: Callable[..., Any], args: list[Any]) -> None:
        out = fn(*args)
        del out

    def _timed_call(self, fn: Callable[..., Any], args: list[Any], i: int) -> Any:
        if self.device == "cuda":
            assert self.flush is not None
            start, end, after = self.pool[3 * i], self.pool[3 * i + 1], self.pool[3 * i + 2]
            self.flush.zero_()
            self.record(start)
            self._call(fn, args)
            self.record(end)
            self.wait_event(end)
            t0 = self.clock()
            self.sync()  # device-wide: returns at once unless other streams still have work
            hidden_ns = self.clock() - t0
            self.record(after)
            return (start, end, after, hidden_ns)
        t0 = self.clock()
        self._call(fn, args)
        return self.clock() - t0

    def _warm_up(self, fn: Callable[..., Any], input_sets: list[list[Any]]) -> int:
        k = len(input_sets)
        calls, sum_calls, start = 0, 0, self.clock()
        block_ns: list[int] = []  # mean ns per call of each block
        while True:
            # A block is up to 10 calls or a quarter of the warm-up budget, so slow models
            # are not held to 10 calls per block.
            block_start = self.clock()
            for _ in range(10):
                self._call(fn, input_sets[calls % k])
                if self.device == "cuda":
                    self.sync()
                calls += 1
                if self.clock() - block_start >= self.warmup_ns // 4:
                    break
            block_ns.append((self.clock() - block_start) // max(1, calls - sum_calls))
            sum_calls = calls
            spent = self.clock() - start
            if spent >= self.warmup_ns * _MAX_WARMUP_FACTOR:
                return calls
            if spent >= self.warmup_ns and len(block_ns) >= 3 and _settled(block_ns[-3:]):
                return calls

    def run(self, fn: Callable[..., Any], input_sets: list[list[Any]]) -> dict[str, Any]:
        k = len(input_sets)
        warm = self._warm_up(fn, input_sets)
        raw: list[Any] = []
        t0 = self.clock()
        while True:
            raw.append(self._timed_call(fn, input_sets[len(raw) % k], len(raw)))
            n, spent = len(raw), self.clock() - t0
            if n >= self.max_calls:
                break
            if n >= self.min_calls and spent >= self.min_time_ns:
                break
            if n >= 3 and spent >= self.max_time_ns:
                break
        wall_ns = self.clock() - t0
        flags: list[str] = []
        if self.device == "cuda":
            self.sync()
            samples, hidden = self._gpu_samples(raw)
            if hidden:
                flags.append("unjoined_stream")
        else:
            samples = [ns / 1e6 for ns in raw]
        return {"samples_ms": samples, "warmup_calls": warm, "wall_ms": wall_ns / 1e6,
                "sync_latency_ms": self.sync_latency_ms, "idle_sync_ms": self.idle_sync_ms, "flags": flags}

    def _gpu_samples(self, raw: list[Any]) -> tuple[list[float], bool]:
        stream_ms = [float(self.elapsed(s, e)) for s, e, _, _ in raw]
        hidden_ms = [ns / 1e6 for _, _, _, ns in raw]
        slack = max(_TAIL_SLACK_MS, _TAIL_SLACK_SHARE * statistics.median(stream_ms))
        if statistics.median(hidden_ms) - self.idle_sync_ms <= slack:
            return stream_ms, False
        total_ms = [float(self.elapsed(s, a)) for s, _, a, _ in raw]
        charged = [max(w, t - self.sync_latency_ms) for w, t in zip(stream_ms, total_ms)]
        return charged, True


def _settled(blocks: list[int]) -> bool:
    """The last blocks' per-call times agree within 3%."""
    return max(blocks) <= 1.03 * min(blocks)
