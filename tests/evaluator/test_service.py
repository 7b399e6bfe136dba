"""The service around the pipeline: caches, sharing, cancellation, problem checks, baselines, devices."""

import asyncio
import os
import re
import time

import pytest
import torch

from stark_mcp.evaluator import Evaluator, EvaluatorError
from stark_mcp.evaluator.host.evaluation import ParentEvaluation
from stark_mcp.problems import ProblemError, load_problem
from stark_mcp.records import Status
from tests.evaluator.conftest import FAST, FIXTURES, fixture_text
from tests.toolchain import shared_toolchain

pytestmark = pytest.mark.anyio


def problem(name: str = "relu_sum.py"):
    return load_problem(str(FIXTURES / name))


async def test_second_evaluation_comes_from_the_cache(cache_dir) -> None:
    settings = FAST.model_copy(update={"trials": 3})
    async with Evaluator(cache_dir, settings, toolchain_dir=shared_toolchain()) as ev:
        first = await ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu")
        leases = len((await ev.worker_pool("cpu")).history)
        second = await ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu")
        # no worker was asked: a count, not a clock (the clock also read the evaluator's close, 1.5 s
        # once on a loaded 2-core machine)
        assert leases and len((await ev.worker_pool("cpu")).history) == leases
    assert first.status is Status.PASSED and not first.cached
    assert second.cached
    # the cache directory is shared with other tests: the first may say what changed since an
    # older result of the same source (``reevaluated``); the stored result never carries that note
    assert second.reevaluated is None
    notes = {"cached", "reevaluated"}
    assert second.model_dump(exclude=notes) == first.model_dump(exclude=notes)


async def test_identical_concurrent_requests_share_one_evaluation(cache_dir, monkeypatch) -> None:
    calls = []
    original = ParentEvaluation._device_evaluation

    async def counting(self, *args, **kwargs):
        calls.append(1)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(ParentEvaluation, "_device_evaluation", counting)
    settings = FAST.model_copy(update={"trials": 2})
    async with Evaluator(cache_dir, settings, toolchain_dir=shared_toolchain()) as ev:
        results = await asyncio.gather(
            *[
                ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu", use_cache=False)
                for _ in range(3)
            ]
        )
    assert len(calls) == 1
    assert all(r.status is Status.PASSED for r in results)
    assert results[0] == results[1] == results[2]


HANG = """
import time
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        while True:
            time.sleep(0.05)
"""


def _is_runner(pid: int) -> bool:
    try:
        return _runner_argv(open(f"/proc/{pid}/cmdline", "rb").read(), pid)
    except OSError:
        return False


def _runner_argv(cmdline: bytes, pid: int) -> bool:
    """A runner: started by bubblewrap as ``python -m ...runner`` (not the bwrap processes around it),
    or forked by the zygote, whose command line it keeps: then it is PID 2 of its jail's namespace
    (1 is the jail's init, and the zygote's other processes are outside any jail) and named after its
    module (a problem's reference jail, also forked, is ``stark-serve``)."""
    argv = cmdline.split(b"\0")
    if not argv or b"python" not in os.path.basename(argv[0]):
        return False
    if b"stark_mcp.evaluator.sandbox.zygote" not in argv:  # which names the runner module it preloads
        return b"stark_mcp.evaluator.untrusted.runner" in argv
    try:
        with open(f"/proc/{pid}/status") as fh:
            nspid = next(line.split()[1:] for line in fh if line.startswith("NSpid:"))
    except (OSError, StopIteration):
        return False
    if not (len(nspid) > 1 and nspid[-1] == "2"):
        return False
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip() == "stark-runner"
    except OSError:
        return False


def runner_pids(root: int | None = None) -> set[int]:
    """Runner processes started by this test process (other test workers run evaluations of their
    own), or by the worker ``root``."""
    parents: dict[int, int] = {}
    runners = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            if _runner_argv(cmdline, int(entry)):
                runners.add(int(entry))
    top = os.getpid() if root is None else root
    ours, frontier = {top}, {top}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - ours
        ours |= frontier
    if root is not None:  # a forked runner is the zygote's child, in a cgroup under its worker's
        # (named stark-<pid>-<start time> by the machine-wide claims; stark-<pid> before them)
        ours |= {pid for pid in runners if re.search(rf"/stark-{root}[-/]", _cgroup_of(pid))}
    return runners & ours


def _cgroup_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            return fh.read()
    except OSError:
        return ""


async def _runners_of(ev: Evaluator, seen: set[int], stop: asyncio.Event) -> None:
    """Every runner process that ``ev``'s CPU worker starts until ``stop`` (none of another
    evaluator's, such as the folder's shared one, whose spare may start meanwhile)."""
    (slot,) = (await ev.worker_pool("cpu")).slots
    while not stop.is_set():
        if slot.handle.proc is not None:
            seen |= runner_pids(slot.handle.proc.pid)
        await asyncio.sleep(0.01)


async def test_a_spare_runner_waits_for_an_idle_worker(cache_dir) -> None:
    """The next candidate's runner is started ahead only once the worker has been idle for a while
    (``SPARE_IDLE_S``): a parent that pauses finds a spare waiting, which its next evaluation takes,
    and one that closes the worker at once (a one-off ``eval``) started none for nothing."""
    from stark_mcp.evaluator.trusted.worker import SPARE_IDLE_S

    def watch(ev: Evaluator, seen: set[int]) -> tuple[asyncio.Event, asyncio.Task[None]]:
        stop = asyncio.Event()
        return stop, asyncio.create_task(_runners_of(ev, seen, stop))

    first: set[int] = set()
    second: set[int] = set()
    async with Evaluator(cache_dir, FAST, toolchain_dir=shared_toolchain()) as ev:
        stop, watcher = watch(ev, first)
        await ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu", use_cache=False)
        stop.set()
        await watcher
        assert len(first) == 2, first  # the candidate's runner and the eager baseline's
        worker = (await ev.worker_pool("cpu")).slots[0].handle.proc.pid
        deadline = time.monotonic() + SPARE_IDLE_S + 60
        while not runner_pids(worker) - first and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        spare = runner_pids(worker) - first
        assert len(spare) == 1, spare  # started once the worker was idle
        stop, watcher = watch(ev, second)
        await ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu", use_cache=False)
    stop.set()  # watched until the worker is gone
    await watcher
    assert spare <= second  # the second evaluation ran in the spare
    assert second - first == spare, second  # and closed at once, the worker started no other


HAUNT = """
import os
import signal
import time

import torch.nn as nn


def _haunt():
    # A grandchild in a session of its own that outlives this evaluation and goes after whatever
    # runs next: the spare runner that now starts while the worker idles, and the files it is given.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open("/proc/self/comm", "w") as handle:
                handle.write("stark-haunt")
            end = time.time() + 60
            while time.time() < end:
                for entry in os.listdir("/proc"):
                    if entry.isdigit() and int(entry) != os.getpid():
                        try:
                            os.kill(int(entry), signal.SIGKILL)
                        except OSError:
                            pass
                for path in ("/tmp/job/candidate.py", "/tmp/build/candidate.py"):
                    try:
                        with open(path, "w") as handle:
                            handle.write("raise SystemExit('haunted')\\n")
                    except OSError:
                        pass
                time.sleep(0.02)
        os._exit(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _haunt()

    def forward(self, a, b):
        return (a + b).clamp_min(0.0)
"""


async def test_a_candidates_lingering_process_cannot_reach_the_spare_that_runs_the_next(cache_dir) -> None:
    """The spare now starts while the worker idles after an evaluation: a process the last candidate
    left behind (its own session, killing every pid it sees, overwriting the next job's files) must
    be gone with that candidate's jail, and the next candidate runs untouched in the spare."""
    from stark_mcp.evaluator.trusted.worker import SPARE_IDLE_S

    async with Evaluator(cache_dir, FAST, toolchain_dir=shared_toolchain()) as ev:
        await ev.evaluate(problem(), HAUNT, device="cpu", use_cache=False)
        worker = (await ev.worker_pool("cpu")).slots[0].handle.proc.pid
        used = runner_pids(worker)
        deadline = time.monotonic() + SPARE_IDLE_S + 60
        while not runner_pids(worker) - used and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert runner_pids(worker) - used  # the spare started after the haunting candidate
        assert not _named("stark-haunt")
        honest = await ev.evaluate(problem(), fixture_text("torch_ok.py"), device="cpu", use_cache=False)
        assert honest.status is Status.PASSED, honest.message
    assert not _named("stark-haunt")


def _named(comm: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/comm") as handle:
                if handle.read().strip() == comm:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


async def _until_in_correctness(phases: list[str]) -> None:
    deadline = time.monotonic() + 90
    while "correctness" not in phases and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert "correctness" in phases


async def test_cancelling_the_caller_kills_the_candidate_process(cache_dir) -> None:
    before = runner_pids()
    phases: list[str] = []

    async def progress(done, total, message):
        phases.append(message)

    async with Evaluator(cache_dir, FAST, toolchain_dir=shared_toolchain()) as ev:
        task = asyncio.create_task(
            ev.evaluate(problem(), HANG, device="cpu", use_cache=False, progress=progress)
        )
        await _until_in_correctness(phases)  # the candidate is now inside its endless forward
        started = runner_pids() - before
        assert started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        def left() -> set[int]:  # ours, and those seen running even if something re-parented them
            return (runner_pids() - before) | {pid for pid in started if _is_runner(pid)}

        deadline = time.monotonic() + 10
        while left() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not left()


async def test_a_checked_problem_is_not_queued_behind_a_busy_worker(cache_dir) -> None:
    """A second run of a problem (create_run again) checks it without waiting for the worker, which
    may be busy for a long time (a background profile, another candidate's evaluation)."""
    phases: list[str] = []

    async def progress(done, total, message):
        phases.append(message)

    async with Evaluator(cache_dir, FAST, toolchain_dir=shared_toolchain()) as ev:
        await ev.check_problem(problem(), device="cpu")
        busy = asyncio.create_task(
            ev.evaluate(problem(), HANG, device="cpu", use_cache=False, progress=progress)
        )
        await _until_in_correctness(phases)  # the only worker is inside the endless forward
        start = time.monotonic()
        await ev.check_problem(problem(), device="cpu")
        waited = time.monotonic() - start
        assert not busy.done()
        busy.cancel()
        with pytest.raises(asyncio.CancelledError):
            await busy
    assert waited < 1.0


# The problem checks need no evaluator of their own: the folder's warm one answers, as a server's does.
async def test_check_problem_accepts_a_good_problem(evaluator: Evaluator) -> None:
    await evaluator.check_problem(problem("affine_tanh.py"), device="cpu")


@pytest.mark.parametrize(
    "name,needles",
    [
        ("problem_import_error.py", ["import failed", "stark_missing_dependency"]),
        ("problem_inputs_raise.py", ["get_inputs() failed", "no inputs today"]),
    ],
)
async def test_check_problem_names_what_is_wrong(evaluator: Evaluator, name, needles) -> None:
    with pytest.raises(ProblemError) as info:
        await evaluator.check_problem(problem(name), device="cpu")
    for needle in needles:
        assert needle in str(info.value)


async def test_a_problem_too_large_for_the_machine_is_refused_with_its_sizes(evaluator: Evaluator) -> None:
    with pytest.raises(ProblemError) as info:
        await evaluator.check_problem(problem("problem_too_big.py"), device="cpu")
    message = str(info.value)
    assert "memory failed" in message and "GiB of host memory" in message and "inputs 128.00 GiB" in message


async def test_evaluating_against_a_broken_problem_raises_problem_error(evaluator: Evaluator) -> None:
    with pytest.raises(ProblemError, match="no inputs today"):
        await evaluator.evaluate(
            problem("problem_inputs_raise.py"),
            "import torch.nn as nn\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return x * 2\n",
            device="cpu",
        )


async def test_baselines_are_timed_once_then_cached(cache_dir) -> None:
    settings = FAST.model_copy(update={"min_calls": 31})  # a timing hash of its own
    async with Evaluator(cache_dir, settings, toolchain_dir=shared_toolchain()) as ev:
        first = await ev.baselines(problem("affine_tanh.py"), device="cpu", which=["eager"])
        leases = len((await ev.worker_pool("cpu")).history)
        second = await ev.baselines(problem("affine_tanh.py"), device="cpu", which=["eager"])
        assert leases and len((await ev.worker_pool("cpu")).history) == leases  # no worker was asked
        with pytest.raises(EvaluatorError, match="unknown baseline"):
            await ev.baselines(problem(), device="cpu", which=["reduce_overhead"])
    assert first == second and first["eager"].samples >= 31 and first["eager"].median_ms > 0
    assert list((cache_dir / "baselines").glob("*.json"))


async def test_device_resolution(cache_dir) -> None:
    async with Evaluator(cache_dir, FAST, toolchain_dir=shared_toolchain()) as ev:
        assert await ev.resolve_device("cpu") == "cpu"
        assert await ev.resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
        with pytest.raises(EvaluatorError, match="device must be auto, cpu or cuda, not .tpu."):
            await ev.resolve_device("tpu")
        if not torch.cuda.is_available():
            with pytest.raises(EvaluatorError, match="no CUDA device"):
                await ev.resolve_device("cuda")
