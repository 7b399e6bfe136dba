"""Which evaluator work is in the background: it yields the device to evaluations.

A run's compile baselines (timed after ``create_run`` returned) and the profiles of its recorded
attempts are nobody's answer: an agent waits for ``add_child``'s verdict, not for them. Work started
inside ``background()`` takes a device slot only while no evaluation waits for one, and an
evaluation that finds every slot held by background work stops one (its worker is killed; the work
starts again once the slot is free) rather than waiting behind it (``slot_pool.SlotPool``).

A context variable, so the tasks a caller starts inside the block inherit it and nothing between the
caller and the pool (the ``Executor`` protocol, the service's helpers) carries a flag. Work the Ray
executor sends to another process runs there at normal priority.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_BACKGROUND: ContextVar[bool] = ContextVar("stark_background_work", default=False)


@contextlib.contextmanager
def background() -> Iterator[None]:
    """Run the block's device work (and that of the tasks it starts) as background work."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def in_background() -> bool:
    """Whether the caller's device work is background work (False: an evaluation's own, or a user's)."""
    return _BACKGROUND.get()
