"""The trusted worker's candidate runners: spares started ahead of time, taken by an evaluation and
given the candidate's files (``stage``). Standard library and torch only.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.sandbox.host_layout import spare_cores
from stark_mcp.evaluator.sandbox.launch import Mount, chown_tree, inside_path
from stark_mcp.evaluator.trusted import profiling
from stark_mcp.evaluator.trusted.candidate_frames import Staged
from stark_mcp.evaluator.trusted.runners import RunnerHandle
from stark_mcp.evaluator.trusted.worker_state import (
    ProblemState,
    Spare,
    WorkerBase,
    _spin,
    json_key,
)

SPARES = 1  # candidate runners kept started ahead of time
# A spare is started once no command has come for this long after the work that used one: a parent
# that sends its next evaluation at once takes a fresh runner as it would a spare (its start-up
# overlaps the staging either way), and one that closes the worker (a one-off `eval`, a test) would
# only pay for a runner nobody takes (one bubblewrap starts imports torch: 1.2-3 CPU-s on a 2-core
# machine; a forked one, sandbox/zygote.py, costs about 0.1 s).
SPARE_IDLE_S = 5.0


class SpareRunners(WorkerBase):
    """Candidate runners started ahead of the evaluations that take them."""

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

    def stage(self, state: ProblemState, spare: Spare, job: wire.Job | None) -> Staged:
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
        if spare.runner.jail is not None and spare.runner.jail.uid is not None:
            chown_tree(build, spare.runner.jail.uid)
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
