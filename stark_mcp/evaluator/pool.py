"""A pool of interchangeable evaluation slots (one per GPU, or CPU stand-ins) handing each job to a free one.

A slot is leased whole for one job, so two timings never share a device. A job that fails with
an infrastructure fault (``WorkerCrashed``: the slot's process died, hung or sent garbage) is
retried on another slot when there is one; a slot that faults in ``max_faults`` jobs in a row is
taken out of the pool (and closed), and a pool with no slot left fails every job with a message
saying so. Generic over the slot type so the local executor (``WorkerClient``) and the Ray
executor (an actor handle) share it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from stark_mcp.evaluator.errors import EvaluatorError

S = TypeVar("S")
T = TypeVar("T")

DEFAULT_ATTEMPTS = 3
DEFAULT_MAX_FAULTS = 3


class PoolExhausted(EvaluatorError):
    """Every slot of the pool was taken out after repeated faults."""


@dataclass
class Slot(Generic[S]):
    label: str
    handle: S
    faults: int = 0  # consecutive: a success resets it
    retired: bool = False
    busy: bool = False


@dataclass(frozen=True)
class Lease:
    """One job on one slot: the record tests and diagnostics read back."""

    slot: str
    started: float
    ended: float
    outcome: str  # "ok", "fault" or "cancelled"


@dataclass
class SlotPool(Generic[S]):
    slots: list[Slot[S]]
    what: str = "evaluation worker"
    attempts: int = DEFAULT_ATTEMPTS
    max_faults: int = DEFAULT_MAX_FAULTS
    on_retire: Callable[[Slot[S]], Awaitable[None]] | None = None
    fault_types: tuple[type[BaseException], ...] = ()
    history: deque[Lease] = field(default_factory=lambda: deque(maxlen=4096))

    def __post_init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def live(self) -> list[Slot[S]]:
        return [s for s in self.slots if not s.retired]

    async def run(
        self, job: Callable[[S], Awaitable[T]], *, prefer: Callable[[Slot[S]], bool] | None = None
    ) -> T:
        """``job(handle)`` on a free slot; on a fault, again on another slot (up to ``attempts`` in all)."""
        tried: set[int] = set()
        last: BaseException | None = None
        for _ in range(self.attempts):
            slot = await self._acquire(tried, prefer)
            started = time.monotonic()
            outcome = "cancelled"
            try:
                result = await job(slot.handle)
                outcome = "ok"
                slot.faults = 0
                return result
            except self.fault_types as exc:
                outcome = "fault"
                last = exc
                # One job counts once against a slot, however often it is retried there: a job that
                # faults everywhere (a candidate that breaks whichever worker runs it) must not take
                # a machine's only GPU out of service on its own.
                if id(slot) not in tried:
                    slot.faults += 1
                tried.add(id(slot))
                if slot.faults >= self.max_faults:
                    slot.retired = True
                    if self.on_retire is not None:
                        await self.on_retire(slot)
            finally:
                self.history.append(Lease(slot.label, started, time.monotonic(), outcome))
                self._release(slot)
        raise EvaluatorError(f"the {self.what} failed {self.attempts} times in a row: {last}") from None

    async def _acquire(self, tried: set[int], prefer: Callable[[Slot[S]], bool] | None) -> Slot[S]:
        while True:
            live = self.live
            if not live:
                raise PoolExhausted(
                    f"every {self.what} was taken out of the pool after faults in {self.max_faults} "
                    "jobs in a row; fix the device and restart"
                )
            # A retry goes elsewhere when elsewhere exists; a preference (the node where a build
            # lies) is followed when a preferred slot lives.
            fresh = [s for s in live if id(s) not in tried] or live
            if prefer is not None and any(prefer(s) for s in fresh):
                fresh = [s for s in fresh if prefer(s)]
            free = [s for s in fresh if not s.busy]
            if free:
                chosen = min(free, key=lambda s: s.faults)
                chosen.busy = True
                return chosen
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _release(self, slot: Slot[S]) -> None:
        """Synchronous, so a cancelled job still frees its slot; every waiter looks again."""
        slot.busy = False
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
