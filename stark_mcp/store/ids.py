"""Short ids a person can type: a kind prefix and a few lowercase base32 characters."""

from __future__ import annotations

import random

# Crockford's lowercase alphabet: no i, l, o, u, so ids survive being read aloud or retyped.
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
RUN_ID_LENGTH = 6
EVALUATION_ID_LENGTH = 8


def short_id(prefix: str, length: int, rng: random.Random) -> str:
    return prefix + "".join(rng.choice(ALPHABET) for _ in range(length))


def new_run_id(rng: random.Random) -> str:
    return short_id("r-", RUN_ID_LENGTH, rng)


def new_evaluation_id(rng: random.Random) -> str:
    return short_id("e-", EVALUATION_ID_LENGTH, rng)


def node_id(seq: int) -> str:
    """The node id is its creation order, so n0 is always the root."""
    return f"n{seq}"
