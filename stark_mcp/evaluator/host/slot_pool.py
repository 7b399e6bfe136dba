"""A pool of interchangeable evaluation slots (one per GPU, or CPU stand-ins) handing each job to a free one.

A slot is leased whole for one job, so two timings never share a device. A job that fails with
an infrastructure fault (``WorkerCrashed``: the slot's process died, hung or sent garbage) is
retried on another slot when there is one; a slot that faults in ``max_faults`` jobs in a row is
taken out of the pool (and closed), and a pool with no slot left fails every job with a message
saying so. Generic over the slot type so the local executor (``WorkerClient``) and the Ray
executor (an actor handle) share it.

Background work (``run(..., background=label)``: a run's late compile baselines, its attempts'
profiles) yields to foreground work: it takes a slot only while no foreground job waits, and a
foreground job that finds every slot busy stops a background one (cancels it: a worker's command is
cancelled by killing the worker) and takes its slot; the background job starts again from the start
once a slot is free, up to ``MAX_PREEMPTIONS`` times, after which it keeps its slot to the end (so a
busy device cannot starve it forever). A foreground job's wait for a slot is reported to ``waited``
with the label of what held it.
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
_PREEMPTED = object()  # what ``_preemptible`` returns for a job a foreground job stopped

DEFAULT_ATTEMPTS = 3
DEFAULT_MAX_FAULTS = 3
MAX_PREEMPTIONS = 2


class PoolExhausted(EvaluatorError):
    """Every slot of the pool was taken out after repeated faults."""


@dataclass
class Slot(Generic[S]):
    label: str
    handle: S
    faults: int = 0  # consecutive: a success resets it
    retired: bool = False
    busy: bool = False
    job: str = ""  # the label of what runs on it now
    # set while a background job that may still be stopped runs on it: stops that job
    preempt: Callable[[], None] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Lease:
    """One job on one slot: the record tests and diagnostics read back."""

    slot: str
    started: float
    ended: float
    outcome: str  # "ok", "fault", "cancelled" or "preempted"


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
        self._foreground_waiting = 0

    @property
    def live(self) -> list[Slot[S]]:
        return [s for s in self.slots if not s.retired]

    async def run(
        self,
        job: Callable[[S], Awaitable[T]],
        *,
        prefer: Callable[[Slot[S]], bool] | None = None,
        label: str = "evaluation",
        background: bool = False,
        waited: Callable[[str, float], None] | None = None,
    ) -> T:
        """``job(handle)`` on a free slot; on a fault, again on another slot (up to ``attempts`` in all).

        ``background``: yield to foreground jobs (see the module's docstring). ``waited(what,
        seconds)``: called once a foreground job has a slot, if it had to wait for one."""
        tried: set[int] = set()
        last: BaseException | None = None
        faults = preemptions = 0
        while faults < self.attempts:
            asked = time.monotonic()
            slot, held_by = await self._acquire(tried, prefer, background)
            if waited is not None and held_by:
                waited(held_by, time.monotonic() - asked)
            started = time.monotonic()
            outcome = "cancelled"
            slot.job = label
            try:
                if background and preemptions < MAX_PREEMPTIONS:
                    result = await self._preemptible(slot, job)
                    if result is _PREEMPTED:
                        outcome = "preempted"
                        preemptions += 1
                        continue
                else:
                    result = await job(slot.handle)
                outcome = "ok"
                slot.faults = 0
                return result  # type: ignore[return-value]
            except self.fault_types as exc:
                outcome = "fault"
                faults += 1
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
                slot.job, slot.preempt = "", None
                self._release(slot)
        raise EvaluatorError(f"the {self.what} failed {self.attempts} times in a row: {last}") from None

    @staticmethod
    async def _preemptible(slot: Slot[S], job: Callable[[S], Awaitable[T]]) -> T | object:
        """``job`` as a task a foreground job can stop through ``slot.preempt``: ``_PREEMPTED`` then."""
        inner = asyncio.ensure_future(job(slot.handle))
        stopped = False

        def preempt() -> None:
            nonlocal stopped
            stopped = True
            slot.preempt = None
            inner.cancel()

        slot.preempt = preempt
        try:
            return await inner
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if stopped and inner.cancelled() and (current is None or not current.cancelling()):
                return _PREEMPTED
            raise

    async def _acquire(
        self, tried: set[int], prefer: Callable[[Slot[S]], bool] | None, background: bool = False
    ) -> tuple[Slot[S], str]:
        """A free slot, leased, and what held the slots while this job waited ("" if it did not)."""
        held_by: list[str] = []
        if not background:
            self._foreground_waiting += 1
        try:
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
                # background work waits while any foreground job does (it was woken with them)
                if free and not (background and self._foreground_waiting):
                    chosen = min(free, key=lambda s: s.faults)
                    chosen.busy = True
                    return chosen, ", ".join(dict.fromkeys(held_by))
                if not background:
                    held_by += [s.job for s in fresh if s.busy and s.job]
                    stoppable = [s for s in fresh if s.busy and s.preempt is not None]
                    if stoppable and not free:
                        stoppable[0].preempt()  # type: ignore[misc]
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                finally:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
        finally:
            if not background:
                self._foreground_waiting -= 1
                if not self._foreground_waiting:
                    self._wake()

    def _release(self, slot: Slot[S]) -> None:
        """Synchronous, so a cancelled job still frees its slot; every waiter looks again."""
        slot.busy = False
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
