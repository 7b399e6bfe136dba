"""What a build leaves beside its library: ``build_report.json`` (which strategy built each file, in
what time, and why any fallback was taken) and ``build.log`` (the compiler's messages). Standard
library only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

REPORT_FILE = "build_report.json"
LOG_FILE = "build.log"


@dataclass
class StepRecord:
    target: str
    variant: str  # pch | plain | light+parallel | parallel | nvcc | link
    seconds: float
    ok: bool
    note: str = ""
    cpu_seconds: float = 0.0  # compilers' user + system time: the measure to compare on a loaded machine


@dataclass
class BuildReport:
    ok: bool
    name: str
    strategy: str  # fast | plain
    library: str | None = None
    seconds: float = 0.0
    steps: list[StepRecord] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    pch_built_seconds: float = 0.0
    log: str = ""

    def to_dict(self) -> dict[str, Any]:  # free-form: the JSON written to build_report.json
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildReport:  # free-form: that JSON, read back
        steps = [StepRecord(**s) for s in data.get("steps", [])]
        return cls(**{**data, "steps": steps})


def finish_report(report: BuildReport, out_dir: str, start: float) -> BuildReport:
    build_dir = os.path.join(out_dir, "build")
    if os.path.isdir(build_dir):  # nvcc's kept intermediates are ~50 MB per file with torch headers
        for entry in os.listdir(build_dir):
            if entry.startswith("nvcc-"):
                shutil.rmtree(os.path.join(build_dir, entry), ignore_errors=True)
    report.seconds = round(time.monotonic() - start, 3)
    for step in report.steps:
        step.seconds = round(step.seconds, 3)
    with open(os.path.join(out_dir, LOG_FILE), "w") as fh:
        fh.write(report.log)
    with open(os.path.join(out_dir, REPORT_FILE), "w") as fh:
        json.dump(report.to_dict(), fh, indent=1)
    return report
