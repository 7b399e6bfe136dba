"""The trusted worker's device and jails: the jail a runner or a reference gets (cores, memory cap,
environment), the zygote runners are forked from, the device's memory (input slots, room for a
problem, waiting for memory to come back) and an out-of-memory answer. Standard library and torch only.
"""

from __future__ import annotations

import os
import time

import torch

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.forked import ZygoteClient
from stark_mcp.evaluator.sandbox.host_layout import timing_cores
from stark_mcp.evaluator.sandbox.launch import JailSpec, Mount, inside_path
from stark_mcp.evaluator.trusted.driver import (
    free_bytes,
    give_back_cached,
    host_available_bytes,
)
from stark_mcp.evaluator.trusted.problem import (
    LoadedProblem,
    ResourceExhausted,
)
from stark_mcp.evaluator.trusted.worker_state import (
    ProblemState,
    WorkerBase,
    _drop_early,
)

# Every runner (baseline and candidate) gets the same fixed glibc allocator behaviour. Left alone, the
# mmap threshold adapts to a process's history, so a fresh candidate process pays page faults on every
# output allocation that the long-lived baseline process no longer pays (measured: 0.35 to 2.6 ms for
# the same 1 MB elementwise op), which is unfair timing and breaks the overhead calibration.
ALLOCATOR_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
    "MALLOC_TOP_PAD_": str(64 << 20),
}


def input_slots(inputs: int, total: int) -> int:
    """Two rotating input slots per runner, one when a call's ``inputs`` are large next to the
    device's ``total`` memory (gigabytes on a GPU)."""
    return 2 if not total or 8 * inputs < 0.2 * total else 1


def _large_tensors(limit: int = 1 << 30) -> str:
    """The tensors of ``limit`` bytes or more this process holds, with what holds them: the one line
    that tells a user (and us) where a worker's memory went when it ran out."""
    import gc

    found = []
    for obj in gc.get_objects():
        if type(obj) is torch.Tensor and obj.untyped_storage().nbytes() >= limit:
            holders = sorted({type(r).__name__ for r in gc.get_referrers(obj)} - {"list", "frame"})
            where = ", ".join(holders) or "a list"
            found.append(f"{list(obj.shape)} {obj.dtype} on {obj.device} (in {where})")
    return "; ".join(found[:12])


class DeviceJails(WorkerBase):
    """Jails, the zygote and the device's memory, for the other parts of ``Worker``."""

    def jail_spec(self, name: str, settings: WorkerSettings, build: Mount | None = None) -> JailSpec:
        env = scrub_env(os.environ, ALLOCATOR_ENV)
        threads = settings.cpu_threads
        if not self.cuda and threads > 0:
            env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        if build is not None:
            inside = inside_path(self.info.level, build)
            env.update(TORCH_EXTENSIONS_DIR=inside, TRITON_CACHE_DIR=os.path.join(inside, "triton"))
        roots = [p for p in self.visible if p]
        if roots:
            env["PYTHONPATH"] = os.pathsep.join(
                roots + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
            )
        cpus = None
        count = os.cpu_count() or 1
        if not self.cuda and threads > 0:
            if count > threads:
                cpus = list(range(count - threads, count))
        elif self.cuda and (own := timing_cores(self.gpu_index)):
            # Each side of a GPU timing handshake spins on a core of its own, and each GPU of the host
            # has its own three (host_layout.py): builders and other GPUs' runners stay off them.
            # The reference jail works only while the worker waits for it: the worker's own core.
            cpus = [own[1]] if name == "baseline" else [own[0]] if name == "reference" else [own[2]]
        return JailSpec(
            argv=[],
            env=env,
            name=name,
            memory_max=settings.jail_memory_bytes or None,
            gpu=self.gpu_index if self.cuda else None,
            cpus=cpus,
            hidden=list(self.hidden),
            visible=list(self.visible),
        )

    def zygote(self) -> ZygoteClient | None:
        """Where runners are forked from (``sandbox/zygote.py``, the zygote that forked this worker):
        only where their jail runs as root at the sandbox level, and while it can build jails."""
        if not (self.info.level == "sandbox" and self.info.root):
            return None
        if self._zygote is None or not self._zygote.alive():
            return None
        return self._zygote

    def _slots(self, problem: LoadedProblem) -> int:
        return self._slots_for(max(s.input_bytes for s in problem.shapes))

    def _slots_for(self, inputs: int) -> int:
        return input_slots(inputs, self._total_bytes())

    def slots(self, problem: LoadedProblem) -> int:
        return self._slots(problem)

    def _total_bytes(self) -> int:
        """What the device has in all: the GPU's memory, or the host's available memory."""
        if self.cuda:
            return int(torch.cuda.get_device_properties(self.device).total_memory)
        return host_available_bytes()

    def _free_bytes(self) -> int:
        return free_bytes(self.device)

    def _memory_settled(self, timeout: float = 10.0) -> None:
        """After a runner is gone, wait until the driver has given its GPU memory back."""
        if not self.cuda:
            return
        give_back_cached(self.device)
        deadline = time.monotonic() + timeout
        previous = -1
        while time.monotonic() < deadline:
            free, _ = torch.cuda.mem_get_info(self.device)
            if free == previous:
                return
            previous = free
            time.sleep(0.05)

    def memory_settled(self) -> None:
        self._memory_settled()

    def _make_room(self, state: ProblemState) -> None:
        """Close other problems' warm baselines (least recently used first) until this problem's
        estimated need fits in what the device has free: a long-lived worker (a benchmark, a shared
        server) must not run out of memory on the tenth problem because it kept the nine before."""
        state.used = time.monotonic()
        give_back_cached(self.device)  # the free figure below leaves out our allocator's reserve
        state.problem.trim()  # and the reference jail's
        need = int(getattr(state.problem, "need_bytes", 0) or 0)
        others = sorted(
            (s for s in self.problems.values() if s is not state and s.baseline is not None),
            key=lambda s: s.used,
        )
        for other in others:
            if self._free_bytes() >= 1.2 * need:
                return
            other.baseline.close()
            other.baseline = None
            other.problem.suspend()  # its reference jail holds its models (and a CUDA context)
            self._memory_settled()

    def _exhausted(self, exc: ResourceExhausted, eval_id: str | None = None) -> None:
        """Out of memory in the problem's own code (in its reference jail) or in this worker's copies:
        an infrastructure fault (the parent retries it on a fresh worker), never the problem's; what
        this worker kept warm is let go first, the reference jails' memory with it."""
        for state in self.problems.values():
            if state.baseline is not None:
                state.baseline.close()
                state.baseline = None
            _drop_early(state)
            state.problem.trim()
        held = _large_tensors()
        self._memory_settled()
        free = self._free_bytes() / (1 << 30)
        self.send(
            wire.InfraError(
                id=eval_id,
                message=f"out of memory in the trusted worker or a reference jail ({exc}); "
                f"{free:.1f} GiB free after letting go "
                f"of the problems it kept warm; it held {held or 'no tensor of 1 GiB or more'}",
            )
        )
