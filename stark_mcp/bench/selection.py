"""Which problems a benchmark runs: level filter, explicit selection, seeded sample per level.

Pure over a loaded problem list; the order of the collection is kept whatever the order of the
options, so the same command always runs the same problems in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from stark_mcp.bench.errors import BenchError
from stark_mcp.problems import Problem
from stark_mcp.problems.sets import problem_key


def select_problems(
    problems: Sequence[Problem],
    *,
    levels: Sequence[int] | None = None,
    select: Sequence[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[Problem]:
    """The problems to run.

    ``levels``: keep only these levels. ``select``: keep only problems named by key
    (``LEVEL/ID``), ``LEVEL/NAME`` or name; every item must match one. ``sample``: then draw
    that many problems from each level (problems without a level form one group), seeded by
    ``seed`` and the level, so adding a level leaves the other levels' draws unchanged.
    """
    chosen = list(problems)
    if levels:
        wanted = set(levels)
        chosen = [p for p in chosen if p.level in wanted]
        if not chosen:
            have = sorted({p.level for p in problems if p.level is not None})
            raise BenchError(
                f"no problem has level {', '.join(map(str, sorted(wanted)))}; "
                + (
                    f"the collection has levels {', '.join(map(str, have))}"
                    if have
                    else "the collection has no levels"
                )
            )
    if select:
        chosen = _by_name(chosen, select)
    if sample is not None:
        if sample < 1:
            raise BenchError(f"--sample must be at least 1, got {sample}")
        chosen = _sample(chosen, sample, seed)
    return chosen


def _names(problem: Problem) -> set[str]:
    names = {problem_key(problem), problem.name}
    if problem.level is not None:
        names.add(f"{problem.level}/{problem.name}")
    return names


def _by_name(problems: list[Problem], select: Sequence[str]) -> list[Problem]:
    items = [s.strip() for s in select if s.strip()]
    matched: set[str] = set()
    keep: list[Problem] = []
    for problem in problems:
        hits = _names(problem) & set(items)
        if hits:
            keep.append(problem)
            matched |= hits
    unknown = [s for s in items if s not in matched]
    if unknown:
        examples = ", ".join(problem_key(p) for p in problems[:3])
        raise BenchError(
            f"--select names no problem for {', '.join(unknown)} (after the level filter); "
            f"use LEVEL/ID, LEVEL/NAME or NAME, e.g. {examples}"
        )
    return keep


def _sample(problems: list[Problem], n: int, seed: int) -> list[Problem]:
    groups: dict[int | None, list[Problem]] = {}
    for problem in problems:
        groups.setdefault(problem.level, []).append(problem)
    drawn: set[str] = set()
    for level, group in groups.items():
        rng = random.Random(f"{seed}:{level}")
        drawn.update(problem_key(p) for p in rng.sample(group, min(n, len(group))))
    return [p for p in problems if problem_key(p) in drawn]
