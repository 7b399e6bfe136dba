"""The trusted worker's problems: loading one into its reference jail, sizing it against the device,
keeping a few reference jails running, and the problem's SOL counts. Standard library and torch only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.sandbox import jail_dirs
from stark_mcp.evaluator.sandbox.launch import Mount, inside_path
from stark_mcp.evaluator.trusted.driver import (
    give_back_cached,
)
from stark_mcp.evaluator.trusted.problem import (
    JailRequestTimes,
    LoadedProblem,
    ProblemFailure,
    ResourceExhausted,
    drawn_ahead_bytes,
)
from stark_mcp.evaluator.trusted.reference_jail import ReferenceJail
from stark_mcp.evaluator.trusted.runners import RunnerHandle
from stark_mcp.evaluator.trusted.worker_state import (
    ProblemState,
    WorkerBase,
    _spin,
    json_key,
)

MEMORY_SHARE = 0.9  # a problem needing more of the device's memory than this is refused up front
# Reference jails kept running (the least recently used beyond this are suspended, and started again
# when their problem is next used): each holds its models and, on a GPU, a CUDA context of its own.
OPEN_REFERENCES = 4
INIT_LIMIT = 1 << 30  # the init file a reference jail saves: its file size limit (JailSpec.max_file_bytes)


class ProblemLoading(WorkerBase):
    """The ``load`` and ``sol_counts`` commands and the reference jails they keep."""

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
