"""The run's random streams: one independent, reproducible RNG per step."""

from __future__ import annotations

import random


def step_rng(seed: int, step: int) -> random.Random:
    """The RNG for step ``step`` of a run seeded with ``seed``.

    Seeding from the string (hashed with SHA-512 by ``random``) rather than chaining one RNG
    through the run means a resumed run replays step t's choices without replaying steps < t.
    """
    return random.Random(f"{seed}:{step}")
