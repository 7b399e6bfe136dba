"""Running the suite side by side (``pytest -n 3 --dist loadgroup``, pytest-xdist, the default in
pyproject.toml; ``-n 0`` runs one test at a time).

Many tests wait on processes more than they compute (the server tests kept 0.53 of a 2-core machine
busy), so three workers share it well: 583-632 s against 870-890 s on one, in clean-clone runs on
26-27 Nov 2026. With three the machine is busy (78-86% of both cores, by `vmstat`), and four were
slower (624 s; 625 s against 587 s late on 26 Nov). On a slower VM (`import torch` 3 CPU-s against
1.2) the suite took 24 to 26 minutes while about half its CPU went to processes that each start by
importing torch; with workers, runners, builders and compile jails forked from a zygote that imports
it once it takes 655-790 s there (docs/benchmarks/suite.md, `tools/suite_profile.py`). One toolchain
directory serves the whole run (``pytest_sessionstart``), so each precompiled torch header is made once.

A test that judges a timing (an honest control must not be flagged, a cheat must not gain a speedup)
measures the machine as a user's evaluation would, so it runs alone: marked ``alone``, it takes an
exclusive lock that every other test holds shared while it runs. A gate lock makes a waiting
``alone`` test block new arrivals, so a stream of ordinary tests on the other workers cannot starve
it, and consecutive ``alone`` tests keep the lock. One run of seven flagged an honest control
(``honest_two_pass_variance`` at 0.23x) while it held the lock; that control is flagged one test at
a time as well (about one evaluation in eight: its forward leaves the harness's share of each call
on cold caches, tests/adversarial/cases.py), so it was not the other workers.

Tests that use a folder's session fixture holding an evaluator (its workers, its build cache) or a
benchmark's two CLI runs (``bench_run``) stay on one worker (``xdist_group`` per folder), so that
folder's C++ builds, precompiled headers and benchmark are made once (a session fixture is made
once per worker that asks for it); the folder's other tests (their own temporary caches, or none)
go wherever a worker is free. A run whose pytest and xdist lose the groups stops at its collection
(tests/xdist_groups.py).
"""

from __future__ import annotations

import fcntl
import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from stark_mcp.config import VARIABLES
from tests.toolchain import VARIABLE as TOOLCHAIN_VARIABLE
from tests.xdist_groups import check_groups_kept

# The suite starts about 120 Python processes that import the project (CLIs, servers, zygotes,
# probes) and three xdist workers that each rewrite and import every test module. Where the
# environment turns bytecode caching off (PYTHONDONTWRITEBYTECODE=1, as on this project's dev
# machines), each of them compiled every source again: about 3 CPU-s per worker's collection and
# 0.3 s per process. Loaded before xdist starts its workers, so they and everything a test starts
# inherit it; the caches land in the checkout's ignored __pycache__ folders. (A user's project is
# another matter: the capture of a user's module keeps the variable, stark_mcp/usercode/introspect.py.)
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# Every `stark-mcp eval` a test starts evaluates in its own process, as before the warm evaluator:
# each test's STARK_HOME is a key of its own, so each would leave a daemon behind for its idle time.
# The warm evaluator's tests (tests/orchestrator/test_warm_evaluator.py) turn it on in their env.
os.environ[VARIABLES["eval_daemon"]] = "0"

SHARED_FOLDERS = ("adversarial", "evaluator", "bench")
SHARED_SESSION_FIXTURES = {"evaluator", "cache_dir", "suite_evaluator", "suite_cache", "bench_run"}
# Module fixtures that start processes (a server with its evaluator and runs, a zygote, the user's
# program under capture): their module's tests share one worker, so each is made once a run, not
# once on every worker its tests land on (3 to 8 CPU-s each time, docs/benchmarks/suite.md).
SHARED_MODULE_FIXTURES = {"flow", "served", "seeded", "two_workers", "zygote", "captured", "warm"}


def pytest_sessionstart(session: pytest.Session) -> None:
    # The same folder in every worker (their base directories share the session's) and in the
    # controller; set before any test, so every CLI and server a test starts inherits it.
    base = session.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    folder = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
    os.environ[TOOLCHAIN_VARIABLE] = str(folder / "toolchain")


@pytest.hookimpl(wrapper=True)  # before xdist's own, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    tests = Path(__file__).resolve().parent
    # Slow tests first, the longest (``slow(seconds=...)``) first among them: xdist hands out its
    # work units (a test, or a whole ``xdist_group`` at its first test's place) in this order, two to
    # each worker at the start (``--no-loadscope-reorder``: by default it orders units by how many
    # tests they hold, which put every group, even one of two tests, before the README's demo). A
    # minute-long test picked up late is the suite's tail (the README's demo started 523 s into a
    # 614 s run) or holds an ``alone`` test off, which holds every other worker off meanwhile: the
    # demo and the prompt's example, started 300 s in, held the adversarial suite's first ``alone``
    # case 130 s, one or two cores idle (docs/benchmarks/suite.md, stop 15). The run ends with the
    # quick tests, so the workers finish together.
    items.sort(key=_slow_first)
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu and _cuda_available():  # without CUDA they skip: no reason to wait for the machine
        for item in gpu:
            # GPU tests time kernels on the one GPU they share: two at once flagged an honest kernel
            item.add_marker(pytest.mark.alone)
    for item in items:
        parts = Path(str(item.path)).resolve().relative_to(tests).parts
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if len(parts) > 1 and parts[0] in SHARED_FOLDERS and SHARED_SESSION_FIXTURES & fixtures:
            item.add_marker(pytest.mark.xdist_group(parts[0]))
        elif SHARED_MODULE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.xdist_group("/".join(parts)))
    yield
    check_groups_kept(config, items)  # after xdist's: the groups are in the ids it sends


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # After the last test, pytest's check for unraisable exceptions collects garbage five times and
    # the interpreter once more as it exits: with torch, mcp and the test modules loaded, each full
    # pass costs a worker about 0.3 CPU-s, at the run's end where every worker pays it at once. One
    # pass here (its finalizers still report to that check), then what survived it is frozen, so the
    # later passes only look at what is made from now on.
    gc.collect()
    gc.freeze()


def _slow_first(item: pytest.Item) -> tuple[bool, float]:
    slow = item.get_closest_marker("slow")
    if slow is None:  # a module fixture's group is seconds of work too: handed out with the slow tests
        return not SHARED_MODULE_FIXTURES & set(getattr(item, "fixturenames", ())), 0.0
    return False, -float(slow.kwargs.get("seconds", 0))


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


class _Turns:
    """This worker's hold on the session's two lock files (none without xdist)."""

    def __init__(self) -> None:
        self.files: tuple[IO[str], IO[str]] | None = None
        self.exclusive = False

    def take(self, folder: Path, exclusive: bool) -> None:
        if self.files is not None and self.exclusive == exclusive:
            return  # the run of ``alone`` tests goes on
        self.give_back()
        gate, run = open(folder / "gate.lock", "a"), open(folder / "run.lock", "a")  # noqa: SIM115
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(run, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            fcntl.flock(gate, fcntl.LOCK_UN)
        self.files, self.exclusive = (gate, run), exclusive

    def give_back(self) -> None:
        if self.files is not None:
            for handle in reversed(self.files):
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            self.files = None


_TURNS = _Turns()


def _alone(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("alone") is not None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    if "PYTEST_XDIST_WORKER" in os.environ:
        # Every worker's base directory sits in the session's own folder: the locks are this run's.
        folder = item.config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
        _TURNS.take(folder, exclusive=_alone(item))
    yield


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    # A run of consecutive ``alone`` tests keeps the machine; an ordinary test lets an ``alone`` one in.
    if not (_alone(item) and _alone(nextitem)):
        _TURNS.give_back()
