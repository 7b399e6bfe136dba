"""The trusted worker: ``python -P -m stark_mcp.evaluator.trusted.worker IN_FD OUT_FD DEVICE WORKDIR``.

One per device, kept warm by the parent: torch imported, the device initialized, problems loaded
(each in its reference jail, which holds the problem's code and its reference models), and a
baseline runner per problem. It never runs a candidate's code, nor the problem's: it starts jails for
both and talks to them through frames and shared memory. Commands arrive as frames on
IN_FD; answers (and progress) leave as frames on OUT_FD. Every command and answer is a record of
``common/wire.py`` (which lists them, with what each carries); a command is dispatched by its record
type (``HANDLERS``), and one that is unknown or malformed is answered ``InfraError`` with the reason.

The worker is cut along what it does, one part a module, joined here: its device and jails
(``worker_device.py``), problems and their reference jails (``worker_problems.py``), spare candidate
runners (``worker_spares.py``), baselines and calibration (``worker_baselines.py``), the state they
share (``worker_state.py``); the evaluation, the outside tools and serving the commands are here.

Standard library and torch only.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from stark_mcp.evaluator.common import frames, wire
from stark_mcp.evaluator.common.outside_tools import TOOLS, ToolPaths
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.sandbox.cgroups import remove_own, sweep_stale
from stark_mcp.evaluator.sandbox.forked import ZYGOTE_FD_ARG, ZygoteClient
from stark_mcp.evaluator.sandbox.host_layout import timing_cores
from stark_mcp.evaluator.sandbox.levels import IsolationInfo, SandboxPolicy, detect
from stark_mcp.evaluator.trusted import profiling
from stark_mcp.evaluator.trusted.driver import DeviceTools
from stark_mcp.evaluator.trusted.problem import ProblemFailure, ResourceExhausted
from stark_mcp.evaluator.trusted.session import InfraError, Session
from stark_mcp.evaluator.trusted.worker_baselines import BaselineTiming
from stark_mcp.evaluator.trusted.worker_device import DeviceJails, input_slots
from stark_mcp.evaluator.trusted.worker_problems import OPEN_REFERENCES, ProblemLoading
from stark_mcp.evaluator.trusted.worker_spares import SPARE_IDLE_S, SpareRunners
from stark_mcp.evaluator.trusted.worker_state import ProblemState, Spare, _drop_early

__all__ = ["HANDLERS", "OPEN_REFERENCES", "SPARE_IDLE_S", "Worker", "input_slots", "main"]


def _prctl_subreaper_and_deathsig() -> None:
    """Orphans of our jails reparent to us (so we can kill them); we die with the parent."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


class Worker(ProblemLoading, SpareRunners, BaselineTiming, DeviceJails):
    """One device's trusted worker: its parts joined, the evaluation and the outside tools, and the
    loop that serves the parent's commands."""

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
