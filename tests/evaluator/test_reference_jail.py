"""The problem's code runs only in its reference jail, never in the trusted worker.

A problem's module-level code, get_init_inputs, Model and get_inputs run in a jail of their own
(evaluator/reference/); the worker asks it for inputs and reference outputs. Here, in real
processes on the CPU: a problem whose module-level code writes wherever the worker could leaves
nothing outside its jail and still judges an honest candidate; problems that hang or exit at import
are a clear ProblemError in seconds, and the worker goes on serving other problems."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from stark_mcp.evaluator.trusted.worker import OPEN_REFERENCES, Worker
from stark_mcp.problems import ProblemError, problem_from_source
from stark_mcp.records import Status
from tests.evaluator.conftest import FAST, evaluate_fixture, fixture_text

pytestmark = pytest.mark.anyio

BODY = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(64, 128), torch.randn(64, 128)]


def get_init_inputs():
    return []
'''

# Module-level code that writes a marker into every place the trusted worker could write: a host
# folder by its absolute path, the process's working folder, its HOME, and the folder above its own
# file (the worker's work folder, when the worker imported the problem from it). It records the
# process and user it ran as in each, and never fails: where it cannot write, it moves on.
SIDE_EFFECTS = '''
import os

MARK = {mark!r}
NOTE = f"pid={{os.getpid()}} uid={{os.getuid()}}"
for folder in ({host!r}, os.getcwd(), os.path.expanduser("~"), os.path.dirname(os.path.dirname(__file__))):
    try:
        with open(os.path.join(folder, MARK), "w") as fh:
            fh.write(NOTE)
    except OSError:
        pass
'''


def _found(mark: str, places: list[Path]) -> list[str]:
    found = [str(p / mark) for p in places if (p / mark).exists()]
    done = subprocess.run(
        ["find", "/tmp", "-maxdepth", "5", "-name", mark], capture_output=True, text=True, check=False
    )  # the worker's folder is somewhere under the evaluator's temporary folder
    return found + done.stdout.split()


async def test_module_level_side_effects_stay_in_the_jail_and_the_verdict_stands(
    evaluator, tmp_path: Path
) -> None:
    isolation = await evaluator.isolation()
    mark = f"stark-refjail-{uuid.uuid4().hex}"
    host = tmp_path / "host"
    host.mkdir()
    source = SIDE_EFFECTS.format(mark=mark, host=str(host)) + BODY
    places = [host, Path.cwd(), Path.home()]
    try:
        result = await evaluator.evaluate(
            problem_from_source(source, name="side_effects"), fixture_text("torch_ok.py"), device="cpu",
            settings=FAST, use_cache=False,
        )  # fmt: skip
        assert result.status is Status.PASSED, result.message
        if isolation.level == "sandbox":
            assert _found(mark, places) == []
        elif isolation.level == "uid":  # no mount namespace: whatever lands was written by its own uid
            notes = {Path(p).read_text() for p in _found(mark, places)}
            assert all(not n.endswith(f" uid={os.getuid()}") for n in notes), notes
        # (at the process level the jail is the evaluator's user: nothing stops the writes, by design)
    finally:
        for path in _found(mark, places):
            Path(path).unlink(missing_ok=True)


@pytest.mark.parametrize(
    "header,words",
    [
        ("import time\ntime.sleep(10**6)\n", "did not answer within"),
        ("import os\nos._exit(3)\n", "exited with code 3"),
        ("import sys\nsys.exit(0)\n", "SystemExit"),
    ],
    ids=["sleeps_forever", "exits_the_process", "raises_system_exit"],
)
async def test_a_problem_that_hangs_or_exits_at_import_is_a_clear_error_and_the_worker_lives_on(
    evaluator, header: str, words: str
) -> None:
    quick = FAST.model_copy(update={"load_timeout_s": 2.0})  # the jail may take 4x this to load
    problem = problem_from_source(header + BODY, name=f"bad_{uuid.uuid4().hex[:8]}")
    started = time.monotonic()
    with pytest.raises(ProblemError) as caught:
        await evaluator.evaluate(problem, fixture_text("torch_ok.py"), device="cpu", settings=quick,
                                 use_cache=False)  # fmt: skip
    assert time.monotonic() - started < 60
    assert "import failed" in str(caught.value) and words in str(caught.value), str(caught.value)
    after = await evaluate_fixture(evaluator, "relu_sum.py", "torch_ok.py", use_cache=False)
    assert after.status is Status.PASSED, after.message


TRIPPED = '''
import torch
import torch.nn as nn

STARK_IMPORT_ROOTS = [{root!r}]

import switch  # from the import root: the jail imports the problem's own package


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    switch.maybe_exit()  # get_inputs runs only in the reference jail
    return [torch.randn(64, 128), torch.randn(64, 128)]


def get_init_inputs():
    return []
'''

SWITCH = '''
import os


def maybe_exit():
    if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "trip")):
        os._exit(7)
'''


async def test_a_reference_jail_that_died_is_started_again_for_the_next_evaluation(evaluator) -> None:
    # In the repository rather than a 0700 pytest folder: the problem's import root must be readable
    # by the jails' own users.
    root = Path.cwd() / f".refjail-test-{uuid.uuid4().hex[:8]}"
    root.mkdir(mode=0o755)
    try:
        (root / "switch.py").write_text(SWITCH)
        problem = problem_from_source(TRIPPED.format(root=str(root)), name="tripped")
        candidate = fixture_text("torch_ok.py")

        async def evaluate():
            return await evaluator.evaluate(problem, candidate, device="cpu", settings=FAST, use_cache=False)

        assert (await evaluate()).status is Status.PASSED
        (root / "trip").write_text("")
        with pytest.raises(ProblemError, match="exited with code 7"):
            await evaluate()
        (root / "trip").unlink()
        again = await evaluate()  # the same worker: its jail for the problem starts afresh
        assert again.status is Status.PASSED, again.message
    finally:
        shutil.rmtree(root)


# Module-level code that names its process (comm): the test finds each problem's jail by that name.
NAMED = '''
with open("/proc/self/comm", "w") as fh:
    fh.write({name!r})
''' + BODY


def _reference_jails_named(prefix: str) -> set[str]:
    """Names of the live reference jails whose name starts with ``prefix``: the problem's baseline
    runner imports the problem too (and so takes the name); only the reference jail has the
    writable folder for its init file mounted at /tmp/out."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as fh:
                    name = fh.read().strip()
                with open(f"/proc/{entry}/stat") as fh:
                    state = fh.read().rsplit(")", 1)[-1].split()[0]
                with open(f"/proc/{entry}/mountinfo") as fh:
                    mounts = [line.split()[4] for line in fh if len(line.split()) > 4]
            except OSError:
                continue
            if name.startswith(prefix) and state != "Z" and "/tmp/out" in mounts:
                found.add(name)
    return found


async def test_a_worker_keeps_few_reference_jails_and_starts_a_suspended_one_again(evaluator) -> None:
    tag = f"lru{uuid.uuid4().hex[:6]}-"
    names = [f"{tag}{i}" for i in range(OPEN_REFERENCES + 1)]
    problems = [problem_from_source(NAMED.format(name=name), name=name.replace("-", "_")) for name in names]
    candidate = fixture_text("torch_ok.py")

    async def evaluate(problem):
        result = await evaluator.evaluate(problem, candidate, device="cpu", settings=FAST, use_cache=False)
        assert result.status is Status.PASSED, result.message

    for problem in problems:
        await evaluate(problem)
    # One more problem than jails kept: at most OPEN_REFERENCES run, the least recently used ended
    # (a machine short of memory may end more: _make_room suspends too, least recently used first).
    alive = _reference_jails_named(tag)
    assert len(alive) <= OPEN_REFERENCES and names[-1] in alive and names[0] not in alive, alive
    await evaluate(problems[0])  # its jail starts again (from its saved init) and judges as before
    alive = _reference_jails_named(tag)
    assert names[0] in alive and len(alive) <= OPEN_REFERENCES, alive


def test_suspending_keeps_the_most_recently_used_jails_running() -> None:
    class Problem:
        def __init__(self) -> None:
            self.running = True
            self.jail = SimpleNamespace(alive=lambda: self.running)

        def suspend(self) -> None:
            self.running = False

    states = {key: SimpleNamespace(used=used, problem=Problem()) for key, used in
              (("a", 5.0), ("b", 1.0), ("c", 4.0), ("d", 2.0), ("e", 3.0), ("new", 0.0))}
    worker = SimpleNamespace(problems=states)
    Worker._suspend_references(worker, OPEN_REFERENCES - 1, states["new"])  # room for "new"'s jail
    assert {k for k, s in states.items() if s.problem.running} == {"a", "c", "e", "new"}
    states["b"].problem.running = True  # "b" started again: the oldest beyond the cap is ended
    Worker._suspend_references(worker, OPEN_REFERENCES)
    assert {k for k, s in states.items() if s.problem.running} == {"a", "b", "c", "e"}
