"""A check that pytest-xdist kept the suite's ``xdist_group`` marks.

Tests that share a session or module fixture stay on one worker through ``xdist_group``
(tests/conftest.py). xdist carries a test's group from a worker's collection to the scheduler as a
suffix of the test's id; where the installed pytest and xdist lose that suffix (pytest 9.2 with
pytest-xdist 3.8, pytest-xdist#1386), the groups spread over every worker without a word: each worker
makes the fixture again (a precompiled torch header, an evaluator) and a test that looks for its
group's processes sees another worker's. The check stops such a run at its collection instead.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest


def group_suffix(item: pytest.Item) -> str | None:
    """The suffix xdist appends to a grouped test's id (its group names, sorted, joined by ``_``)."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "@" + "_".join(sorted(names)) if names else None


def lost_groups(items: Iterable[pytest.Item]) -> list[str]:
    """Ids of the grouped tests whose id does not carry their group."""
    lost = []
    for item in items:
        suffix = group_suffix(item)
        if suffix is not None and not item.nodeid.endswith(suffix):
            lost.append(item.nodeid)
    return lost


def check_groups_kept(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Stop a ``--dist loadgroup`` worker's collection if xdist did not put a test's group in its id."""
    if not getattr(config.option, "loadgroup", False):  # -n 0, or another --dist
        return
    lost = lost_groups(items)
    if not lost:
        return
    import xdist

    message = (
        f"pytest-xdist did not keep the group of {len(lost)} tests marked xdist_group (the first: "
        f"{lost[0]}), so their shared fixtures would be made on every worker and their tests would "
        f"race: pytest {pytest.__version__} with pytest-xdist {xdist.__version__} does not honour "
        "--dist loadgroup (pytest-xdist#1386). Install the versions pyproject.toml's test extra asks "
        "for: pip install -e '.[test]'"
    )
    # As a collection error: xdist shows a worker's failed collection report and runs nothing (an
    # exception raised here only reads as a crashed worker).
    config.hook.pytest_collectreport(report=pytest.CollectReport("", "failed", message, []))
    items.clear()
