"""The steps of a build: shell commands run at most ``jobs`` at once and recorded with their wall
and CPU time (``StepRunner``), one file's outcome (``FileOutcome``), and a source's text swapped in
and out for a variant. Standard library only.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .build_report import StepRecord


class StepRunner:
    """Runs shell commands in ``cwd``, at most ``jobs`` at once, recording each step."""

    def __init__(self, cwd: str, jobs: int | None) -> None:
        self.cwd = cwd
        self._slots = threading.BoundedSemaphore(jobs) if jobs else None
        self.steps: list[StepRecord] = []
        self.cpu: dict[int, float] = {}
        self._lock = threading.Lock()

    def run(self, command: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
        """Exit code, output and wall seconds; the CPU seconds are added to ``self.cpu[thread]``."""
        if self._slots:
            self._slots.acquire()
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                command,
                shell=True,
                executable="/bin/bash",
                cwd=self.cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            assert proc.stdout is not None
            output = proc.stdout.read().decode(errors="replace")
            proc.stdout.close()
            # wait4 reports the CPU time of the command and every process it waited for (compilers).
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if self._slots:
                self._slots.release()
        with self._lock:
            key = threading.get_ident()
            self.cpu[key] = self.cpu.get(key, 0.0) + usage.ru_utime + usage.ru_stime
        return proc.returncode, output, time.monotonic() - start

    def take_cpu(self) -> float:
        """CPU seconds of the commands this thread ran since the last call."""
        with self._lock:
            return self.cpu.pop(threading.get_ident(), 0.0)

    def record(self, step: StepRecord, extra_cpu: float = 0.0) -> None:
        step.cpu_seconds = self.take_cpu() + extra_cpu
        with self._lock:
            self.steps.append(step)


@dataclass
class FileOutcome:
    ok: bool
    log: str = ""
    fallbacks: list[str] = field(default_factory=list)
    pch_seconds: float = 0.0


def default_jobs() -> int | None:
    value = os.environ.get("MAX_JOBS")
    return int(value) if value and value.isdigit() and int(value) > 0 else None


def failure_log(target: str, command: str, output: str) -> str:
    return f"FAILED: {target}\n{command}\n{output}"


def read_text(path: str) -> str:
    with open(path, errors="replace") as fh:
        return fh.read()


def write_text(path: str, text: str) -> None:
    with open(path) as fh:
        if fh.read() == text:
            return
    with open(path, "w") as fh:
        fh.write(text)
