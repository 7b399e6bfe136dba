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

import pytest

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
