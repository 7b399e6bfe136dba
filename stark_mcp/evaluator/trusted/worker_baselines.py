"""The trusted worker's baselines: the warm eager runner beside every evaluation, the torch.compile
modes timed beside it, and the device's calibration (no runner alive). Standard library and torch only.
"""

from __future__ import annotations

import time

from stark_mcp.evaluator.common import wire
from stark_mcp.evaluator.common.wire import WorkerSettings
from stark_mcp.evaluator.sandbox.launch import Mount, inside_path
from stark_mcp.evaluator.trusted import sol_calibrate, timing
from stark_mcp.evaluator.trusted.driver import (
    Driver,
    give_back_cached,
)
from stark_mcp.evaluator.trusted.problem import (
    ProblemFailure,
    ResourceExhausted,
)
from stark_mcp.evaluator.trusted.runners import RunnerDied, RunnerHandle, RunnerTimeout
from stark_mcp.evaluator.trusted.session import InfraError
from stark_mcp.evaluator.trusted.worker_state import (
    ProblemState,
    WorkerBase,
    _spin,
    json_key,
)


class BaselineTiming(WorkerBase):
    """The ``baseline`` and ``calibrate`` commands and the warm eager runner."""

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
            shapes: list[wire.BaselineShape] = []
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

    def _time_eager(self, state: ProblemState, settings: WorkerSettings) -> list[wire.BaselineShape]:
        eager = self.eager(state, settings)
        shapes: list[wire.BaselineShape] = []
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
