"""The suite's reliance on ``xdist_group`` (tests/conftest.py), checked with the installed pytest and
pytest-xdist in a small run of their own: a group reaches one worker, and a lost group stops the run
at its collection with the reason (tests/xdist_groups.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GROUPED_TESTS = """
import os
import pytest


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    with open(os.path.join(os.environ["RAN"], f"{i}-{os.environ['PYTEST_XDIST_WORKER']}"), "w"):
        pass
"""

MARKING_CONFTEST = """
import pytest
from tests.xdist_groups import check_groups_kept


def mark(items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group("shared"))


@pytest.hookimpl(wrapper=True)  # as tests/conftest.py: around xdist's hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    {before}
    yield
    {after}
    check_groups_kept(config, items)
"""


def run_grouped(tmp_path: Path, early: bool) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Six tests on two workers, grouped before xdist's hook reads the groups into their ids, or
    after it (the group never reaches the ids); what ran, as index-worker."""
    calls = ("mark(items)", "pass") if early else ("pass", "mark(items)")
    (tmp_path / "conftest.py").write_text(MARKING_CONFTEST.format(before=calls[0], after=calls[1]))
    (tmp_path / "test_grouped.py").write_text(GROUPED_TESTS)
    ran = tmp_path / "ran"
    ran.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAN": str(ran)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "--basetemp", str(tmp_path / "base"), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done, sorted(p.name for p in ran.iterdir())


def test_a_group_keeps_its_tests_on_one_worker(tmp_path: Path) -> None:
    done, ran = run_grouped(tmp_path, early=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(ran) == 6 and len({name.split("-", 1)[1] for name in ran}) == 1, ran


def test_a_lost_group_stops_the_run_at_collection_with_the_reason(tmp_path: Path) -> None:
    done, ran = run_grouped(tmp_path, early=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "did not keep the group of 6 tests marked xdist_group" in done.stdout, done.stdout
    assert "pytest-xdist#1386" in done.stdout
    assert ran == []  # nothing ran on workers whose groups were lost
