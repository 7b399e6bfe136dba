"""The trusted worker: ``python -P -m stark_mcp.evaluator.trusted.worker IN_FD OUT_FD DEVICE WORKDIR``.

One per device, kept warm by the parent: torch imported, the device initialized, problems loaded
(each in its reference jail, which holds the problem's code and its reference models), and a
baseline runner per problem. It never runs a candidate's code, nor the problem's: it starts jails for
both and talks to them through frames and shared memory. Commands arrive as frames on
IN_FD; answers (and progress) leave as frames on OUT_FD. Every command and answer is a record of
``common/wire.py`` (which lists them, with what each carries); a command is dispatched by its record
type (``HANDLERS``), and one that is unknown or malformed is answered ``InfraError`` with the reason.

Standard library and torch only.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from stark_mcp.evaluator.common import frames, wire
from stark_mcp.evaluator.common.outside_tools import TOOLS, ToolPaths
from stark_mcp.evaluator.common.wire import GPU_SPIN_S, WorkerSettings
from stark_mcp.evaluator.sandbox import jail_dirs
from stark_mcp.evaluator.sandbox.cgroups import remove_own, sweep_stale
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.forked import ZYGOTE_FD_ARG, ZygoteClient
from stark_mcp.evaluator.sandbox.host_layout import spare_cores, timing_cores
from stark_mcp.evaluator.sandbox.launch import JailSpec, Mount, inside_path
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, SandboxPolicy, detect
from stark_mcp.evaluator.trusted import profiling, sol_calibrate, timing
from stark_mcp.evaluator.trusted.driver import (
    DeviceTools,
    Driver,
    free_bytes,
    give_back_cached,
    host_available_bytes,
)
from stark_mcp.evaluator.trusted.problem import (
    JailRequestTimes,
    LoadedProblem,
    ProblemFailure,
    ResourceExhausted,
    drawn_ahead_bytes,
)
from stark_mcp.evaluator.trusted.reference_jail import ReferenceJail
from stark_mcp.evaluator.trusted.runners import RunnerDied, RunnerHandle, RunnerTimeout
from stark_mcp.evaluator.trusted.session import InfraError, Session

MEMORY_SHARE = 0.9  # a problem needing more of the device's memory than this is refused up front
# Reference jails kept running (the least recently used beyond this are suspended, and started again
# when their problem is next used): each holds its models and, on a GPU, a CUDA context of its own.
OPEN_REFERENCES = 4
INIT_LIMIT = 1 << 30  # the init file a reference jail saves: its file size limit (JailSpec.max_file_bytes)


def _prctl_subreaper_and_deathsig() -> None:
    """Orphans of our jails reparent to us (so we can kill them); we die with the parent."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


SPARES = 1  # candidate runners kept started ahead of time
# A spare is started once no command has come for this long after the work that used one: a parent
# that sends its next evaluation at once takes a fresh runner as it would a spare (its start-up
# overlaps the staging either way), and one that closes the worker (a one-off `eval`, a test) would
# only pay for a runner nobody takes (one bubblewrap starts imports torch: 1.2-3 CPU-s on a 2-core
# machine; a forked one, sandbox/zygote.py, costs about 0.1 s).
SPARE_IDLE_S = 5.0
# Every runner (baseline and candidate) gets the same fixed glibc allocator behaviour. Left alone, the
# mmap threshold adapts to a process's history, so a fresh candidate process pays page faults on every
# output allocation that the long-lived baseline process no longer pays (measured: 0.35 to 2.6 ms for
# the same 1 MB elementwise op), which is unfair timing and breaks the overhead calibration.
ALLOCATOR_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
    "MALLOC_TOP_PAD_": str(64 << 20),
}


def json_key(settings: WorkerSettings) -> str:
    """What a spare's jail depends on: the settings that shape its environment."""
    return f"{settings.cpu_threads}"


def _chown_tree(path: str, uid: int | None) -> None:
    if uid is None:
        return
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            try:
                os.lchown(name, uid, uid)
            except OSError:
                pass


class Spare:
    def __init__(
        self,
        runner: RunnerHandle,
        folder: str,
        job: str,
        build: str,
        visible: list[str],
        settings_key: str,
        out: str | None = None,
    ) -> None:
        self.runner, self.folder, self.job, self.build = runner, folder, job, build
        self.visible, self.settings_key = visible, settings_key
        self.out = out  # a writable folder for an outside tool's report (profiler, sanitizer)
        self.moved_to: list[int] | None = None  # started off its cores: where it goes once taken

    def discard(self) -> None:
        self.runner.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class ProblemState:
    def __init__(self, problem: LoadedProblem, job_dir: str, reference_dir: str) -> None:
        self.problem, self.job_dir = problem, job_dir
        self.reference_dir = reference_dir  # the reference jail's own folder (its problem.py, its out/)
        self.baseline: Driver | None = None
        # the eager runner started during the load, and the settings its jail was made for
        self.early_baseline: tuple[RunnerHandle, str] | None = None
        self.used = time.monotonic()


class Worker:
    def __init__(
        self,
        out_fd: int,
        device: str,
        workdir: str,
        gpu_index: int,
        info: IsolationInfo,
        outside: ToolPaths | None = None,
        zygote: ZygoteClient | None = None,
    ) -> None:
        self.out_fd, self.device, self.workdir = out_fd, device, workdir
        self.outside = outside or ToolPaths()  # Nsight Compute and compute-sanitizer (trusted/profiling.py)
        self.cuda = device.startswith("cuda")
        # Our own CPU work (fresh inputs, comparisons) on one thread: intra-op threads spinning against
        # each other on a small loaded machine made a 64K-element comparison take 800 ms instead of 5.
        torch.set_num_threads(1)
        self.info = info
        if self.cuda:
            torch.cuda.init()
            torch.zeros(1, device=device)
        self.tools = DeviceTools(device)
        # The builder compiled for exactly this list; a runner left to pick its own (+PTX) would see
        # different flags in build.ninja and rebuild from scratch inside the device phase.
        self.arch_env = {}
        if self.cuda:
            major, minor = torch.cuda.get_device_capability(device)
            self.arch_env = {"TORCH_CUDA_ARCH_LIST": f"{major}.{minor}"}
        self.problems: dict[str, ProblemState] = {}
        self.gpu_index = gpu_index  # the host index (PCI order): which node and cores its jails get
        self.hidden: list[str] = []
        self.visible: list[str] = []
        self.spares: list[Spare] = []
        self.spares_wanted: WorkerSettings | None = None  # the settings of the next spares, once idle
        self._zygote = zygote  # set only in a worker the zygote forked (SandboxPolicy.fork)

    def send(self, answer: wire.Answer) -> None:
        frames.send(self.out_fd, answer.to_frame())

    # -- jails ---------------------------------------------------------------------------------------
    def jail_spec(self, name: str, settings: WorkerSettings, build: Mount | None = None) -> JailSpec:
        env = scrub_env(os.environ, ALLOCATOR_ENV)
        threads = settings.cpu_threads
        if not self.cuda and threads > 0:
            env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        if build is not None:
            inside = inside_path(self.info.level, build)
            env.update(TORCH_EXTENSIONS_DIR=inside, TRITON_CACHE_DIR=os.path.join(inside, "triton"))
        roots = [p for p in self.visible if p]
        if roots:
            env["PYTHONPATH"] = os.pathsep.join(
                roots + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
            )
        cpus = None
        count = os.cpu_count() or 1
        if not self.cuda and threads > 0:
            if count > threads:
                cpus = list(range(count - threads, count))
        elif self.cuda and (own := timing_cores(self.gpu_index)):
            # Each side of a GPU timing handshake spins on a core of its own, and each GPU of the host
            # has its own three (host_layout.py): builders and other GPUs' runners stay off them.
            # The reference jail works only while the worker waits for it: the worker's own core.
            cpus = [own[1]] if name == "baseline" else [own[0]] if name == "reference" else [own[2]]
        return JailSpec(
            argv=[],
            env=env,
            name=name,
            memory_max=settings.jail_memory_bytes or None,
            gpu=self.gpu_index if self.cuda else None,
            cpus=cpus,
            hidden=list(self.hidden),
            visible=list(self.visible),
        )

    def zygote(self) -> ZygoteClient | None:
        """Where runners are forked from (``sandbox/zygote.py``, the zygote that forked this worker):
        only where their jail runs as root at the sandbox level, and while it can build jails."""
        if not (self.info.level == "sandbox" and self.info.root):
            return None
        if self._zygote is None or not self._zygote.alive():
            return None
        return self._zygote

    # -- commands ------------------------------------------------------------------------------------
    def load(self, cmd: wire.LoadCommand) -> None:
        key = cmd.key
        self.hidden = list(cmd.hidden)
        self.visible = list(cmd.visible)
        if key in self.problems:
            self.send(self._loaded(self.problems[key].problem))
            return
        job_dir = tempfile.mkdtemp(prefix="problem-", dir=self.workdir)
        shutil.copyfile(cmd.path, os.path.join(job_dir, "problem.py"))
        os.chmod(job_dir, 0o755)
        settings = cmd.settings
        early = self._start_early(job_dir, settings)
        self._suspend_references(OPEN_REFERENCES - 1)
        reference_dir = tempfile.mkdtemp(prefix="reference-", dir=self.workdir)
        problem: LoadedProblem | None = None
        try:
            problem = self._start_reference(key, cmd.name, job_dir, reference_dir, settings)
            problem.on_sizes = self._size_check
            problem.load()
            # The constructor arguments and RNG state the jail saved: copied for the runners, who
            # load it with weights_only; never loaded here, and read following no link the jail made.
            data = jail_dirs.read_bytes(Path(reference_dir), "out/init.pt", INIT_LIMIT)
            with open(os.path.join(job_dir, "init.pt"), "wb") as fh:
                fh.write(data)
        except (ProblemFailure, ResourceExhausted, OSError) as exc:
            if early is not None:
                early[0].close()
            if problem is not None:
                problem.close()
            shutil.rmtree(job_dir, ignore_errors=True)
            shutil.rmtree(reference_dir, ignore_errors=True)
            if isinstance(exc, ResourceExhausted):
                self._exhausted(exc)
                return
            fail = exc if isinstance(exc, ProblemFailure) else ProblemFailure("init", f"{exc}")
            self.send(wire.ProblemError(step=fail.step, message=fail.message, traceback=fail.tb))
            return
        give_back_cached(self.device)  # the exchange of the shape probes' copies is garbage now
        state = self.problems[key] = ProblemState(problem, job_dir, reference_dir)
        state.early_baseline = early
        if self.cuda and self._slots(problem) <= 1:  # inputs that fill the device: no extra context
            for spare in self.spares:
                spare.discard()
            self.spares = []
        self.send(self._loaded(problem))

    def _start_reference(
        self, key: str, name: str, job_dir: str, reference_dir: str, settings: WorkerSettings
    ) -> LoadedProblem:
        """The problem's reference jail, started the way its baseline runner is: its own copy of the
        problem (read-only) and a folder it may write its init file to; the problem's import roots
        readable, as for runners. Its code runs there, never here."""
        out = os.path.join(reference_dir, "out")
        os.mkdir(out)
        shutil.copyfile(os.path.join(job_dir, "problem.py"), os.path.join(reference_dir, "problem.py"))
        for path in (reference_dir, out):
            os.chmod(path, 0o755)
        mounts = [Mount(reference_dir, "/tmp/job"), Mount(out, "/tmp/out", writable=True)]
        hidden, visible = list(self.hidden), list(self.visible)

        def start() -> ReferenceJail:
            spec = self.jail_spec("reference", settings)
            spec.mounts, spec.hidden, spec.visible = list(mounts), hidden, visible
            # The candidates' cap (jail_memory_bytes) contains their hoarding; the problem's jail
            # holds the reference and its float64 twin, and gets the default cap (half the machine).
            spec.memory_max = None
            jail = ReferenceJail()
            try:
                jail.start(spec, self.info, zygote=self.zygote())
            except Exception as exc:  # noqa: BLE001 - a jail that cannot start: the problem's failure
                raise ProblemFailure("start", f"the problem's reference jail did not start: {exc}") from None
            return jail

        load_s = settings.load_timeout_s
        call_s = max(settings.timing_timeout_s, settings.correctness_timeout_s)
        request = {
            "path": f"{inside_path(self.info.level, mounts[0])}/problem.py",
            "module": f"stark_problem_{key}",
            "device": self.device,
            "sys_path": self.visible,
            "out": inside_path(self.info.level, mounts[1]),
        }
        # Generous: a problem of gigabytes builds its model and draws its inputs in these; a hang
        # costs this long once, and the worker lives on.
        times = JailRequestTimes(load_s=4 * load_s, call_s=call_s)
        return LoadedProblem(key, name, self.device, start(), request, times, start)

    def _suspend_references(self, keep: int, state: ProblemState | None = None) -> None:
        """Suspend the reference jails of the least recently used problems other than ``state``'s
        until at most ``keep`` of them run."""
        running = sorted(
            (s for s in self.problems.values() if s is not state and s.problem.jail.alive()),
            key=lambda s: s.used,
        )
        for other in running[: max(0, len(running) - keep)]:
            other.problem.suspend()

    def _ready(self, state: ProblemState) -> None:
        """The problem's reference jail running (started again if it was suspended or died)."""
        state.used = time.monotonic()
        if not state.problem.jail.alive():
            self._suspend_references(OPEN_REFERENCES - 1, state)
            state.problem.reopen()

    def _start_early(self, job_dir: str, settings: WorkerSettings) -> tuple[RunnerHandle, str] | None:
        """Start the problem's eager runner and a spare candidate runner now, while the problem loads
        here: their start-up (a fork, torch's and the CUDA context's initialisation: ~0.3-1 s each on
        an H200) overlaps the load instead of following it inside the first evaluation. Where the
        zygote forks them (or on a GPU); a spare is used once, by one candidate, as every spare."""
        if not (self.cuda or self.zygote() is not None):
            return None
        try:
            if not self.spares:
                self.spares.append(self.spawn_runner(settings))
            runner = RunnerHandle("baseline eager", self.device, _spin(self.cuda))
            spec = self.jail_spec("baseline", settings)
            spec.mounts = [Mount(job_dir, "/tmp/job")]
            runner.start(spec, self.info, zygote=self.zygote())
            return runner, json_key(settings)
        except Exception:  # noqa: BLE001 - started later, where a failure is reported
            return None

    def _loaded(self, problem: LoadedProblem) -> wire.Loaded:
        return wire.Loaded(
            shapes=[s.label for s in problem.shapes], fp64=problem.fp64, fp64_note=problem.fp64_note
        )

    def _size_check(self, problem: LoadedProblem) -> None:
        """Refuse up front what cannot fit; drop the float64 reference (flagged) when only it does not.

        Per problem: two runners' shared regions (slots of inputs, one output) and their own outputs
        and weights; the reference jail's inputs, reference output and weights; here the pristine
        inputs, the reference output's copy and the exchange region; and for the float64 twin twice
        the inputs, outputs and weights again in the jail, its outputs in the exchange and here. The
        first check comes before any shape's inputs exist (their size planned on the meta device)."""
        inputs = max([s.input_bytes for s in problem.shapes] + [problem.planned_input_bytes])
        outputs = max([s.output_bytes for s in problem.shapes] + [0])
        params = problem.param_bytes
        slots = self._slots_for(inputs)
        # The reference jail's inputs, outputs and weights, and here the pristine inputs, the
        # reference's copied outputs and the exchange region between the two (the larger of them).
        need = (
            2 * (slots * inputs + outputs)
            + 2 * (outputs + params)
            + (inputs + outputs + params)
            + (inputs + outputs + max(inputs, outputs))
            + 3 * drawn_ahead_bytes(inputs)  # small inputs drawn a few calls ahead (jail, exchange, here)
        )
        # The twin's weights, inputs and outputs in the jail, its outputs in the exchange and here.
        fp64 = 2 * (inputs + outputs + params) + 4 * outputs
        problem.need_bytes = need
        total = self._total_bytes()
        where = "GPU" if self.cuda else "host"
        if not total:
            return
        gib = 1 << 30
        if need > MEMORY_SHARE * total:
            raise ProblemFailure(
                "memory",
                f"the problem needs about {need / gib:.1f} GiB of {where} memory "
                f"(inputs {inputs / gib:.2f} GiB, outputs {outputs / gib:.2f} GiB, parameters "
                f"{params / gib:.2f} GiB, copied for the reference, the baseline and the "
                f"candidate) and the device has {total / gib:.1f} GiB",
            )
        if problem.fp64 and outputs and need + fp64 > MEMORY_SHARE * total:
            problem.drop_float64(
                f"the float64 reference was skipped: it needs {fp64 / gib:.1f} GiB more than "
                f"the {total / gib:.1f} GiB of {where} memory allow"
            )

    def _slots(self, problem: LoadedProblem) -> int:
        return self._slots_for(max(s.input_bytes for s in problem.shapes))

    def _slots_for(self, inputs: int) -> int:
        return input_slots(inputs, self._total_bytes())

    def baseline_driver(
        self,
        state: ProblemState,
        settings: WorkerSettings,
        compile_mode: str | None = None,
        timeout: float = 300.0,
    ) -> Driver:
        mount = Mount(state.job_dir, "/tmp/job")
        runner = self._early_runner(state, settings) if compile_mode is None else None
        if runner is None:
            runner = RunnerHandle(f"baseline {compile_mode or 'eager'}", self.device, _spin(self.cuda))
            spec = self.jail_spec("baseline", settings)
            spec.mounts = [mount]
            runner.start(spec, self.info, zygote=self.zygote())
        driver = Driver(state.problem, runner, self.tools, self._slots(state.problem))
        inside = inside_path(self.info.level, mount)
        setup = {
            "mode": "reference",
            "device": self.device,
            "module_path": f"{inside}/problem.py",
            "init_path": f"{inside}/init.pt",
            "shapes": driver.shapes_setup(),
            "compile": compile_mode,
            "timing": {
                "sleep_cycles": settings.sleep_cycles,
                "spin_s": _spin(self.cuda),
            },
            "threads": settings.cpu_threads,
            "poison": False,
            "sys_path": self.visible,
        }
        try:
            frame = runner.setup(setup, driver.regions(), timeout)
        except (RunnerDied, RunnerTimeout) as exc:
            driver.close()
            raise InfraError(
                f"the baseline runner did not start: {exc}; {runner.log.text(1500) if runner.log else ''}"
            ) from None
        if frame.get("kind") != "ready":
            driver.close()
            raise ProblemFailure(
                "baseline", str(frame.get("message", frame))[:2000], str(frame.get("traceback", ""))
            )
        return driver

    def _early_runner(self, state: ProblemState, settings: WorkerSettings) -> RunnerHandle | None:
        """The eager runner started while the problem loaded, if it lives and fits ``settings``."""
        early, state.early_baseline = state.early_baseline, None
        if early is None:
            return None
        runner, key = early
        if runner.alive() and key == json_key(settings):
            return runner
        runner.close()
        return None

    def _make_room(self, state: ProblemState) -> None:
        """Close other problems' warm baselines (least recently used first) until this problem's
        estimated need fits in what the device has free: a long-lived worker (a benchmark, a shared
        server) must not run out of memory on the tenth problem because it kept the nine before."""
        state.used = time.monotonic()
        give_back_cached(self.device)  # the free figure below leaves out our allocator's reserve
        state.problem.trim()  # and the reference jail's
        need = int(getattr(state.problem, "need_bytes", 0) or 0)
        others = sorted(
            (s for s in self.problems.values() if s is not state and s.baseline is not None),
            key=lambda s: s.used,
        )
        for other in others:
            if self._free_bytes() >= 1.2 * need:
                return
            other.baseline.close()
            other.baseline = None
            other.problem.suspend()  # its reference jail holds its models (and a CUDA context)
            self._memory_settled()

    def _exhausted(self, exc: ResourceExhausted, eval_id: str | None = None) -> None:
        """Out of memory in the problem's own code (in its reference jail) or in this worker's copies:
        an infrastructure fault (the parent retries it on a fresh worker), never the problem's; what
        this worker kept warm is let go first, the reference jails' memory with it."""
        for state in self.problems.values():
            if state.baseline is not None:
                state.baseline.close()
                state.baseline = None
            _drop_early(state)
            state.problem.trim()
        held = _large_tensors()
        self._memory_settled()
        free = self._free_bytes() / (1 << 30)
        self.send(
            wire.InfraError(
                id=eval_id,
                message=f"out of memory in the trusted worker or a reference jail ({exc}); "
                f"{free:.1f} GiB free after letting go "
                f"of the problems it kept warm; it held {held or 'no tensor of 1 GiB or more'}",
            )
        )

    def _total_bytes(self) -> int:
        """What the device has in all: the GPU's memory, or the host's available memory."""
        if self.cuda:
            return int(torch.cuda.get_device_properties(self.device).total_memory)
        return host_available_bytes()

    def _free_bytes(self) -> int:
        return free_bytes(self.device)

    def eager(self, state: ProblemState, settings: WorkerSettings) -> Driver:
        self._make_room(state)
        if state.baseline is None or not state.baseline.runner.alive():
            if state.baseline is not None:
                state.baseline.close()
            state.baseline = self.baseline_driver(state, settings)
            for shape in range(len(state.problem.shapes)):
                for _ in range(3):
                    state.baseline.call(shape, settings.timing_timeout_s)
            state.baseline.release_last()
        return state.baseline

    # -- spares --------------------------------------------------------------------------------------
    def spawn_runner(
        self, settings: WorkerSettings, tool: profiling.Tool | None = None, ahead: bool = False
    ) -> Spare:
        """A candidate runner started now: jailed, torch imported, waiting for its work. With
        ``tool``, the tool is the jail's command around it and writes its report under ``out``.
        With ``ahead``, it starts on the builders' cores and moves to the candidate runners' core
        when it is taken (see ``_warm_ahead``)."""
        folder = tempfile.mkdtemp(prefix="spare-", dir=self.workdir)
        job, build = os.path.join(folder, "job"), os.path.join(folder, "build")
        os.mkdir(job)
        os.mkdir(build)
        for path in (folder, job):
            os.chmod(path, 0o755)
        mounts = [Mount(job, "/tmp/job"), Mount(build, "/tmp/build", writable=True)]
        spec = self.jail_spec("candidate", settings)
        runner = RunnerHandle("candidate", self.device, _spin(self.cuda))
        if tool is None:
            spec.mounts = mounts
            moved_to = None
            if ahead and spec.cpus:
                moved_to, spec.cpus = spec.cpus, spare_cores()
            runner.start(spec, self.info, zygote=self.zygote())
            spare = Spare(runner, folder, job, build, list(self.visible), json_key(settings))
            spare.moved_to = moved_to
            return spare
        out = os.path.join(folder, "out")
        os.mkdir(out)
        out_mount = Mount(out, profiling.OUT_INSIDE, writable=True)
        spec.mounts = [*mounts, out_mount]
        spec.env.update(tool.env)
        inside = inside_path(self.info.level, out_mount)
        runner.start(
            spec,
            self.info,
            connect=(os.path.join(out, "ctl.sock"), f"{inside}/ctl.sock"),
            prefix=tool.argv(inside),
        )
        return Spare(runner, folder, job, build, list(self.visible), json_key(settings), out)

    def _take_spare(self, settings: WorkerSettings) -> Spare:
        while self.spares:
            spare = self.spares.pop(0)
            if (
                spare.runner.alive()
                and spare.visible == self.visible
                and spare.settings_key == json_key(settings)
            ):
                if spare.moved_to is not None and spare.runner.jail is not None:
                    spare.runner.jail.set_cpus(spare.moved_to)
                    spare.moved_to = None
                return spare
            spare.discard()
        return self.spawn_runner(settings)

    def _warm_ahead(self, state: ProblemState) -> bool:
        """Whether the next spare starts as soon as this evaluation ends, rather than once the worker
        idles: its start-up (a CUDA context and Triton, and torch when bubblewrap starts it: about
        2.5 s on an H100) is otherwise what the next of back-to-back evaluations waits for. Only
        where it can start on cores of its own (a GPU machine that pins its runners): started on the
        candidate runners' core, it preempted the timed runner and inflated honest kernels' figures
        by 35-65% on an H100. Not for problems whose inputs fill the device (one more CUDA context)."""
        return self.cuda and bool(spare_cores()) and self._slots(state.problem) > 1

    def _want_spares(self, settings: WorkerSettings) -> None:
        """Start the spares for ``settings`` once the worker is idle (``serve``, SPARE_IDLE_S)."""
        self.spares_wanted = settings

    def _start_wanted_spares(self) -> None:
        settings, self.spares_wanted = self.spares_wanted, None
        if settings is None:
            return
        try:
            while len(self.spares) < SPARES:
                self.spares.append(self.spawn_runner(settings))
        except Exception:  # noqa: BLE001 - the next evaluation starts its own runner and reports why not
            pass

    # -- evaluation ----------------------------------------------------------------------------------
    def evaluate(self, cmd: wire.EvaluateCommand) -> None:
        eval_id = cmd.id
        state = self.problems.get(cmd.key)
        if state is None:
            self.send(wire.InfraError(id=eval_id, message="problem not loaded"))
            return
        settings = cmd.settings
        started = time.monotonic()
        spare = self._take_spare(settings)
        try:
            self._ready(state)
            job = self.stage(state, spare, cmd.job)
            baseline = self.eager(state, settings)
            baseline.bracket_after_inputs = settings.bracket_after_inputs
            session = Session(
                state.problem,
                baseline,
                self.tools,
                settings,
                lambda phase: self.send(wire.Progress(id=eval_id, phase=phase)),
            )
            setup_s = time.monotonic() - started
            result = session.run(spare.runner, job)
            result["phase_seconds"]["worker_setup"] = round(setup_s, 3)
            self.send(
                wire.Result(id=eval_id, isolation=self.info.level, isolation_note=self.info.note, **result)
            )
        except ProblemFailure as fail:
            self.send(wire.ProblemError(id=eval_id, step=fail.step, message=fail.message, traceback=fail.tb))
        except InfraError as exc:
            self.send(wire.InfraError(id=eval_id, message=str(exc)))
        except ResourceExhausted as exc:
            self._exhausted(exc, eval_id)
        except torch.OutOfMemoryError as exc:  # our own copies, comparisons: the machine, not a verdict
            self._exhausted(ResourceExhausted(str(exc).split(". ")[0][:300]), eval_id)
        finally:
            spare.discard()
            self._memory_settled()
            self._next_spare(state, settings)

    def _next_spare(self, state: ProblemState, settings: WorkerSettings) -> None:
        """Where spares warm ahead (``_warm_ahead``), the next one starts as soon as an evaluation is
        over: its start-up (a CUDA context on the same device, Triton) never overlaps a timed call.
        Started when the evaluation began, a forked spare's CUDA context came up in the middle of a
        cached candidate's timing and tripled its median on an H100 (0.022 -> 0.063 ms)."""
        if self.spares or not self._warm_ahead(state):
            self._want_spares(settings)
            return
        try:
            self.spares.append(self.spawn_runner(settings, ahead=True))
        except Exception:  # noqa: BLE001 - the next evaluation starts its own runner and reports why not
            pass

    def stage(self, state: ProblemState, spare: Spare, job: wire.Job | None) -> dict[str, Any]:
        """Give a started runner its files (the candidate, or the problem when ``job`` is None, the
        constructor arguments, the candidate's build) and say where it sees them."""
        if job is None:
            shutil.copyfile(os.path.join(state.job_dir, "problem.py"), os.path.join(spare.job, "problem.py"))
        else:
            shutil.copyfile(job.source_path, os.path.join(spare.job, "candidate.py"))
        shutil.copyfile(os.path.join(state.job_dir, "init.pt"), os.path.join(spare.job, "init.pt"))
        build_dir = job.build_dir if job is not None else None
        if job is not None and job.build_in_place and build_dir:
            build = build_dir
        else:
            build = spare.build
            if build_dir and os.path.isdir(build_dir):
                shutil.copytree(build_dir, build, symlinks=True, dirs_exist_ok=True)
        _chown_tree(build, spare.runner.jail.uid if spare.runner.jail else None)
        sandbox = self.info.level == "sandbox"
        inside_build = "/tmp/build" if sandbox else build
        return {
            "job": "/tmp/job" if sandbox else spare.job,
            "slots": self._slots(state.problem),
            "deferred": job is not None and job.deferred,
            "env": {
                "TORCH_EXTENSIONS_DIR": inside_build,
                "TRITON_CACHE_DIR": f"{inside_build}/triton",
                **self.arch_env,
            },
            "sys_path": self.visible,
        }

    def slots(self, problem: LoadedProblem) -> int:
        return self._slots(problem)

    def memory_settled(self) -> None:
        self._memory_settled()

    # -- after the evaluation: outside tools (trusted/profiling.py) ------------------------------------
    def profile(self, cmd: wire.ProfileCommand) -> None:
        """Nsight Compute's counters for one forward of a candidate (or the reference)."""
        state = self.problems[cmd.key]
        settings = cmd.settings
        self._ready(state)
        try:
            self.send(profiling.profile(self, state, cmd, settings))
        finally:
            self._want_spares(settings)

    def sanitize(self, cmd: wire.SanitizeCommand) -> None:
        """compute-sanitizer's first report on a candidate that failed with a memory error."""
        state = self.problems[cmd.key]
        settings = cmd.settings
        self._ready(state)
        try:
            self.send(profiling.sanitize(self, state, cmd, settings))
        finally:
            self._want_spares(settings)

    def sol_counts(self, cmd: wire.SolCountsCommand) -> None:
        """The reference's bytes and FLOPs per shape: the problem's floor (docs/sol.md). Never a
        worker fault: a problem whose forward cannot be counted just has no floor."""
        state = self.problems[cmd.key]
        answer: wire.Answer
        try:
            self._ready(state)
            # the reference jail's answer, read as the wire's (its counts are checked by the parent)
            answer = wire.decode_answer(state.problem.sol_counts(), (wire.SolCounts, wire.SolMissing))
        except Exception as exc:  # noqa: BLE001 - the problem's own code failed, in its jail
            answer = wire.SolMissing(message=f"{type(exc).__name__}: {exc}"[:1500])
        finally:
            give_back_cached(self.device)
        self.send(answer)

    def calibrate(self, cmd: wire.CalibrateCommand) -> None:
        """Measure this device's peaks (bandwidth, FP32, tensor cores) with no runner alive."""
        answer: wire.Answer
        try:
            answer = wire.Calibrated.from_frame(sol_calibrate.measure(self.device))
        except Exception as exc:  # noqa: BLE001 - the parent falls back to the datasheet
            answer = wire.SolMissing(message=f"{type(exc).__name__}: {exc}"[:1500])
        finally:
            give_back_cached(self.device)
        self.send(answer)

    def baseline(self, cmd: wire.BaselineCommand) -> None:
        """Time ``name`` (a torch.compile mode) beside eager, in its own runner."""
        name = cmd.name
        state = self.problems[cmd.key]
        settings = cmd.settings
        try:
            self._ready(state)
        except (ProblemFailure, ResourceExhausted) as exc:
            self.send(wire.BaselineMissing(name=name, message=f"{name} failed: {exc}"[:3000]))
            return
        modes = {
            "compile_default": "default",
            "compile_max_autotune": "max-autotune",
            "compile_max_autotune_no_cudagraphs": "max-autotune-no-cudagraphs",
        }
        if name == "eager":
            self.send(wire.Baseline(name=name, mode="eager", shapes=self._time_eager(state, settings)))
            return
        if name not in modes:
            self.send(wire.BaselineMissing(name=name, message=f"unknown baseline {name!r}"))
            return
        driver = None
        try:
            timeout = settings.baseline_timeout_s
            driver = self.baseline_driver(state, settings, modes[name], timeout)
            eager = self.eager(state, settings)
            started = time.monotonic()
            for shape in range(len(state.problem.shapes)):
                for _ in range(3):  # compiles (and recompiles for any guard) outside the timing
                    made = driver.call(shape, timeout)
                    if made.outcome.meta.get("ok") is not True:
                        raise ProblemFailure(name, str(made.outcome.meta.get("message", "failed")))
            first = time.monotonic() - started
            shapes = []
            for shape in range(len(state.problem.shapes)):
                mode_s, eager_s = timing.Samples(), timing.Samples()
                spent, t0 = 0, time.monotonic()
                while spent < settings.min_calls or time.monotonic() - t0 < settings.min_time_s:
                    for drv, samples in ((eager, eager_s), (driver, mode_s)):
                        made = drv.call(shape, timeout)
                        samples.add(made.outcome.reported_ns, made.outcome.bracket_ns)
                    spent += 1
                    if spent >= 3 and time.monotonic() - t0 > settings.max_time_s:
                        break
                shapes.append(
                    {
                        "label": state.problem.shapes[shape].label,
                        "samples_ms": mode_s.reported_ms,
                        "eager_ms": eager_s.reported_ms,
                    }
                )
            eager.release_last()  # the warm eager runner stays; its last call's inputs need not
            first_s = round(first, 3)
            self.send(wire.Baseline(name=name, mode=modes[name], shapes=shapes, first_calls_s=first_s))
        except (ProblemFailure, InfraError, RunnerDied, RunnerTimeout) as exc:
            log = driver.runner.log.text(1500) if driver is not None and driver.runner.log else ""
            self.send(wire.BaselineMissing(name=name, message=f"{name} failed: {exc}\n{log}"[:3000]))
        finally:
            if driver is not None:
                driver.close()
            self._memory_settled()

    def _time_eager(self, state: ProblemState, settings: WorkerSettings) -> list[dict[str, Any]]:
        eager = self.eager(state, settings)
        shapes = []
        timeout = settings.timing_timeout_s
        for shape in range(len(state.problem.shapes)):
            samples = timing.Samples()
            t0 = time.monotonic()
            while len(samples.reported_ms) < settings.min_calls or (
                time.monotonic() - t0 < settings.min_time_s
            ):
                made = eager.call(shape, timeout)
                samples.add(made.outcome.reported_ns, made.outcome.bracket_ns)
                if len(samples.reported_ms) >= 3 and time.monotonic() - t0 > settings.max_time_s:
                    break
            shapes.append(
                {
                    "label": state.problem.shapes[shape].label,
                    "samples_ms": samples.reported_ms,
                    "eager_ms": samples.reported_ms,
                }
            )
        eager.release_last()
        return shapes

    def _memory_settled(self, timeout: float = 10.0) -> None:
        """After a runner is gone, wait until the driver has given its GPU memory back."""
        if not self.cuda:
            return
        give_back_cached(self.device)
        deadline = time.monotonic() + timeout
        previous = -1
        while time.monotonic() < deadline:
            free, _ = torch.cuda.mem_get_info(self.device)
            if free == previous:
                return
            previous = free
            time.sleep(0.05)

    def serve(self, in_fd: int) -> None:
        while True:
            idle = SPARE_IDLE_S if self.spares_wanted is not None else None
            try:
                frame = frames.recv(in_fd, timeout=idle)
            except frames.FrameTimeout:
                self._start_wanted_spares()
                continue
            if frame is None:
                break
            try:
                cmd = wire.decode_command(frame)
                if isinstance(cmd, wire.ShutdownCommand):
                    break
                HANDLERS[type(cmd)](self, cmd)
            except Exception as exc:  # noqa: BLE001 - report (a malformed command too), keep serving
                said = frame.get("id")
                self.send(
                    wire.InfraError(
                        id=said if isinstance(said, str) else None,
                        message=f"{type(exc).__name__}: {exc}",
                        traceback=traceback.format_exc()[-4000:],
                    )
                )
        for state in self.problems.values():
            if state.baseline is not None:
                state.baseline.close()
            _drop_early(state)
            state.problem.close()
        for spare in self.spares:
            spare.discard()
        if self._zygote is not None:
            self._zygote.close()
        if self.info.cgroup:
            remove_own(self.info.cgroup)


# Each command's record type and the method that serves it (the record names the command on the wire).
HANDLERS: dict[type[wire.Command], Callable[[Worker, Any], None]] = {
    wire.LoadCommand: Worker.load,
    wire.EvaluateCommand: Worker.evaluate,
    wire.BaselineCommand: Worker.baseline,
    wire.ProfileCommand: Worker.profile,
    wire.SanitizeCommand: Worker.sanitize,
    wire.SolCountsCommand: Worker.sol_counts,
    wire.CalibrateCommand: Worker.calibrate,
}


def input_slots(inputs: int, total: int) -> int:
    """Two rotating input slots per runner, one when a call's ``inputs`` are large next to the
    device's ``total`` memory (gigabytes on a GPU)."""
    return 2 if not total or 8 * inputs < 0.2 * total else 1


def _large_tensors(limit: int = 1 << 30) -> str:
    """The tensors of ``limit`` bytes or more this process holds, with what holds them: the one line
    that tells a user (and us) where a worker's memory went when it ran out."""
    import gc

    found = []
    for obj in gc.get_objects():
        if type(obj) is torch.Tensor and obj.untyped_storage().nbytes() >= limit:
            holders = sorted({type(r).__name__ for r in gc.get_referrers(obj)} - {"list", "frame"})
            where = ", ".join(holders) or "a list"
            found.append(f"{list(obj.shape)} {obj.dtype} on {obj.device} (in {where})")
    return "; ".join(found[:12])


def _spin(cuda: bool) -> float:
    return GPU_SPIN_S if cuda else 0.0


def _drop_early(state: ProblemState) -> None:
    """Close the eager runner started during the load, if nobody took it."""
    if state.early_baseline is not None:
        state.early_baseline[0].close()
        state.early_baseline = None


def main(argv: list[str]) -> None:
    zygote = None
    if argv and argv[-1].startswith(ZYGOTE_FD_ARG):  # forked by the zygote: its connection for jails
        zygote = ZygoteClient.connect(int(argv.pop()[len(ZYGOTE_FD_ARG) :]))
    in_fd, out_fd, device, workdir = int(argv[0]), int(argv[1]), argv[2], argv[3]
    gpu_index, policy = int(argv[4]), SandboxPolicy.from_json(argv[5])
    outside = ToolPaths.from_json(argv[6]) if len(argv) > 6 else ToolPaths()
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    _prctl_subreaper_and_deathsig()
    if device.startswith("cuda") and (own := timing_cores(gpu_index)):
        os.sched_setaffinity(0, {own[0]})
    info = detect(policy)
    if info.cgroup:
        sweep_stale(info.cgroup)
    worker = Worker(out_fd, device, workdir, gpu_index, info, outside, zygote=zygote)
    worker.send(
        wire.Hello(
            device=device,
            isolation=worker.info.level,
            isolation_note=worker.info.note,
            pid=os.getpid(),
            tools={name: outside.find(name) for name in TOOLS},
        )
    )
    worker.serve(in_fd)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
