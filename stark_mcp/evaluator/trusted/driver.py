"""Driving one runner through calls on fresh inputs: its regions, its slots, the flush, the checks.

A ``Driver`` owns the shared regions of one runner (inputs in ``slots`` rotating copies, outputs) and
turns "make a call on shape s" into: generate fresh inputs here, write them into the next slot, flush
the L2 (trusted: done in this process, after the write), let the runner compute, and optionally
snapshot its published outputs for a check. Standard library and torch only.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from stark_mcp.evaluator.common.control import EXIT, PROFILE
from stark_mcp.evaluator.common.regions import Region
from stark_mcp.evaluator.common.runner_wire import ShapeSetup
from stark_mcp.evaluator.trusted.problem import Call, LoadedProblem
from stark_mcp.evaluator.trusted.runners import CallOutcome, RunnerHandle


class DeviceTools:
    """The worker's own GPU helpers: the L2 flush buffer and an idle probe."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        self.flush_buf: torch.Tensor | None = None
        self.probe_buf: torch.Tensor | None = None
        self.idle_probe_ms: float | None = None
        if self.cuda:
            l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
            self.flush_buf = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device=device)
            self.probe_buf = torch.zeros(16 << 20, device=device)  # 64 MiB: one kernel of ~40 us
            self.idle_probe_ms = self.probe()

    def flush(self) -> None:
        if self.flush_buf is not None:
            self.flush_buf.zero_()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def probe(self, reps: int = 5) -> float:
        """Fastest of a few runs of one fixed kernel in this process. One launch, so a late CPU cannot
        stretch it; slow only when another process's kernels hold the GPU (contexts take turns)."""
        assert self.probe_buf is not None
        times = []
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(reps):
            torch.cuda.synchronize()
            start.record()
            self.probe_buf.mul_(1.0)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return min(times)

    def calibrate(self) -> None:
        """The probe's time on this GPU now, before a candidate has done anything."""
        if self.cuda:
            self.idle_probe_ms = self.probe()

    def gpu_busy(self) -> bool:
        """Another process keeps the GPU busy: the probe is far slower than calibrated, twice running."""
        if not self.cuda or self.idle_probe_ms is None:
            return False
        limit = 3.0 * self.idle_probe_ms + 0.1
        if self.probe() <= limit:
            return False
        time.sleep(0.02)
        return self.probe() > limit


def free_device_bytes(device: str) -> int | None:
    if not device.startswith("cuda"):
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


COLLECT_BYTES = 256 << 20  # a call with inputs this large frees its cyclic garbage when memory is short
COLLECT_HEADROOM = 6  # "short": less free than this many times a call's inputs
COLLECT_ALWAYS_BYTES = 1 << 30  # and one with inputs of gigabytes, always


def host_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def give_back_cached(device: str) -> None:
    """Hand the caching allocator's unused blocks back to the device. Runners are other processes:
    what this worker keeps reserved but unused is memory their own allocations cannot have. Done
    where the worker's need shrinks (after a problem's load, whose shape probes hold two calls'
    inputs and an output; when an evaluation starts and ends), not per call, whose inputs and
    reference the next call needs again. Without it a 6 GB problem's candidate ran out of memory on
    an 80 GB H100 at its first call: the worker held 57 GB, where its regions and live tensors are
    about 36, and between evaluations it kept the last call's inputs (6 GB) in a dead cycle."""
    if device.startswith("cuda"):
        gc.collect()  # a call's inputs can sit in a reference cycle (its closures); 2 GB did
        torch.cuda.empty_cache()


def free_bytes(device: str) -> int:
    """Memory free on ``device`` now: the GPU's, or the host's available memory."""
    if device.startswith("cuda"):
        return int(torch.cuda.mem_get_info(device)[0])
    return host_available_bytes()


@dataclass
class Made:
    outcome: CallOutcome
    call: Call
    slot: int


class Driver:
    """Calls on one runner. ``regions()`` gives the (region, fd) pairs handed to it at setup."""

    def __init__(
        self,
        problem: LoadedProblem,
        runner: RunnerHandle,
        tools: DeviceTools,
        slots: int,
        bracket_after_inputs: bool = False,
    ) -> None:
        self.problem, self.runner, self.tools, self.slots = problem, runner, tools, slots
        self.bracket_after_inputs = bracket_after_inputs
        self.input_leaves, in_bytes = problem.input_layout(slots)
        self.output_leaves, out_bytes = problem.output_layout()
        self.inputs, self.inputs_fd = Region.create(in_bytes, problem.device)
        self.outputs, self.outputs_fd = Region.create(out_bytes, problem.device)
        self._out_bytes = out_bytes
        # Where checked outputs read from the runner's memory land (``fetch``): ours alone. Read into
        # the shared outputs region, which the runner maps, the copy was a sign it could watch for.
        self.received: Region | None = None
        self.next_slot = 0
        self.input_seconds = 0.0  # generating fresh inputs for this runner's calls
        self._last: Call | None = None

    def regions(self) -> dict[str, tuple[Region, int]]:
        return {"inputs": (self.inputs, self.inputs_fd), "outputs": (self.outputs, self.outputs_fd)}

    def shapes_setup(self) -> list[ShapeSetup]:
        return [
            {
                "inputs": {"tree": spec.tree, "slots": self.input_leaves[i]},
                "outputs": {"leaves": self.output_leaves[i]},
            }
            for i, spec in enumerate(self.problem.shapes)
        ]

    def slot_views(self, shape: int, slot: int) -> list[torch.Tensor]:
        return [self.inputs.view(leaf) for leaf in self.input_leaves[shape][slot]]

    def output_views(self, shape: int) -> list[torch.Tensor]:
        return [self.outputs.view(leaf) for leaf in self.output_leaves[shape]]

    def call(self, shape: int, timeout: float) -> Made:
        """One call on fresh inputs; RunnerDied, RunnerTimeout and ControlError propagate.

        The previous call's pristine inputs are let go first (its judging is over by then): with
        inputs of gigabytes, two calls' worth held at once is what ran an 80 GB GPU out of memory."""
        self.release_last()
        started = time.monotonic()
        call = self.problem.new_call(shape)
        self._last = call
        self.input_seconds += time.monotonic() - started
        slot = self.next_slot
        self.next_slot = (self.next_slot + 1) % self.slots

        def before() -> None:
            for view, tensor in zip(self.slot_views(shape, slot), call.tensors, strict=True):
                view.copy_(tensor)
            self.tools.flush()
            self.tools.sync()

        outcome = self.runner.call(shape, slot, call.args, before, timeout, self.bracket_after_inputs)
        return Made(outcome, call, slot)

    def release_last(self) -> None:
        """Let go of the last call's pristine inputs (once it has been judged, or is never judged)."""
        if self._last is not None:
            size = sum(t.numel() * t.element_size() for t in self._last.tensors)
            self._last.tensors = []
            self._last.inputs = []
            self._last = None
            if size >= COLLECT_ALWAYS_BYTES or (
                size >= COLLECT_BYTES and free_bytes(self.problem.device) < COLLECT_HEADROOM * size
            ):
                # A call's references (closures, the reference run's frames) can sit in reference
                # cycles that the collector, counting Python objects rather than bytes, would reach
                # only much later: with 6 GB inputs that was seven dead copies and an OOM on 80 GB,
                # and an OOM again on an H100 when such calls collected only once the device's free
                # figure looked short (that figure leaves out what this worker's allocator keeps
                # reserved: see ``give_back_cached``).
                # Mid-sized calls collect only when memory runs short: a full collection on every
                # call of a 2.5 GB problem cost 20 s of a 27 s evaluation.
                gc.collect()

    def profile(self, shape: int, timeout: float, meta: bool = False) -> Any:
        """One untimed, unchecked forward under the runner's profiler: its kernel list (or None), or
        with ``meta`` its whole answer (launch shapes too)."""
        self.release_last()
        call = self.problem.new_call(shape)
        slot = self.next_slot

        def before() -> None:
            for view, tensor in zip(self.slot_views(shape, slot), call.tensors, strict=True):
                view.copy_(tensor)
            self.tools.sync()

        outcome = self.runner.call(shape, slot | PROFILE, call.args, before, timeout)
        if outcome.meta.get("ok") is not True:
            return str(outcome.meta.get("message", "no profile"))[:300]
        return outcome.meta if meta else outcome.meta.get("kernels")

    def exit(self, timeout: float) -> None:
        """Ask the runner to leave on its own (a tool wrapped around it writes its report then)."""
        self.runner.call(0, EXIT, [], lambda: None, timeout)

    @property
    def reads_privately(self) -> bool:
        """Outputs are read from the runner's memory into ours (``fetch``), not taken from the
        shared region the runner copied them to."""
        return self.runner.memory is not None

    def fetch(self, made: Made) -> None:
        """Copy a call's outputs from the runner's memory into memory of ours alone (``received``),
        where it published them by address (a CPU runner whose memory we can read); nothing to do
        where it copied them into the shared region. Raises OutputUnreadable for an address that is
        not one, or bytes that cannot be read."""
        memory = self.runner.memory
        if memory is None:
            return
        if self.received is None:
            self.received = Region.private(self._out_bytes)
        leaves = self.output_leaves[made.call.shape]
        for leaf, address in published_addresses(made.outcome.meta.get("out")):
            if not 0 <= leaf < len(leaves):
                continue  # validate_tree refuses the description
            if int(leaves[leaf]["nbytes"]):
                memory.read_into(address, self.received.host_bytes(leaves[leaf]))

    def checked_views(self, shape: int) -> list[torch.Tensor]:
        """Where a checked call's outputs are once ``fetch`` is done: our own copy where we read
        them, else the shared region (which the runner can still write)."""
        if self.reads_privately and self.received is not None:
            return [self.received.view(leaf) for leaf in self.output_leaves[shape]]
        return self.output_views(shape)

    def snapshot(self, shape: int) -> list[torch.Tensor]:
        """A private copy of the published outputs, taken once the call is over."""
        return [v.clone() for v in self.checked_views(shape)]

    def mutated_inputs(self, made: Made) -> list[int]:
        """Input tensor leaves the runner changed (compared with the pristine private copy)."""
        changed = []
        for i, (view, pristine) in enumerate(
            zip(self.slot_views(made.call.shape, made.slot), made.call.tensors, strict=True)
        ):
            if torch.equal(view, pristine):  # one pass; NaN inputs take the element-wise path
                continue
            same = (
                view.eq(pristine) | (view.isnan() & pristine.isnan())
                if view.is_floating_point()
                else view.eq(pristine)
            )
            if not bool(same.all()):
                changed.append(i)
        return changed

    def close(self) -> None:
        """The runner, then the regions' memory and descriptors (each once)."""
        self.runner.close()
        self._last = None
        self.inputs.close()
        self.outputs.close()
        if self.received is not None:
            self.received.close()
        for fd in (self.inputs_fd, self.outputs_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.inputs_fd = self.outputs_fd = -1


def published_addresses(tree: Any, limit: int = 4096) -> list[tuple[int, Any]]:
    """(leaf, address) of every tensor node of a runner's (untrusted) output description that names
    a leaf; a node that names one without an address gives None, which no read accepts."""
    found: list[tuple[int, Any]] = []
    stack, seen = [tree], 0
    while stack and seen < limit:
        node = stack.pop()
        seen += 1
        if not isinstance(node, dict):
            continue
        if node.get("k") == "tensor" and type(node.get("leaf")) is int and node["leaf"] >= 0:
            found.append((node["leaf"], node.get("addr")))
        items = node.get("items")
        if node.get("k") == "seq" and isinstance(items, list):
            stack.extend(items[:limit])
    return found
