"""The adversarial suite's cases: candidate files whose docstring declares their class and expectation.

    Class: timed calls do no work
    Problem: scaled_add                   (a file in tests/adversarial/problems/, or ../fixtures/cuda/)
    Expect: wrong_output/* | passed<=1.35

An expectation is alternatives separated by ``|``: ``status/reason`` (``*`` for any reason), ``passed``
(an honest control: passed, and the trusted clock agreed with what its process reported, or
disagreed by no more than a cold harness (CPU) or the bracket's outliers (GPU) explain: see
``explained_gap``), or ``passed<=X``
(passing is allowed only without an unearned speedup: eager / candidate at most X).

``rejected/timing_forged`` has a second safe outcome: a lie too small to tell from the bracket's noise
(a tiny op on a loaded CPU) is not called forgery, but the trusted figure replaces it, so the run passes
flagged ``timing_mismatch`` at its honest speed (at most ``WITHIN_NOISE_SPEEDUP``).
Used by the CPU tests and by tools/gpu_adversarial.py, so it imports nothing from the tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WITHIN_NOISE_SPEEDUP = 1.5
# On the CPU a forward that streams megabytes leaves the harness's share of its call on cold caches
# (and a VM's TLB), which the trusted clock sees and the report does not: an honest two-pass
# variance's trusted figure ran up to 1.16x the calibrated harness share above its report, in about
# 230 evaluations on the 2-core VM (docs/benchmarks/adversarial.md, 26 Nov, evening). The evaluator
# then flags it and uses the trusted figure, as documented; twice the share is what a cold harness
# can explain, and a gap past it is not the harness.
COLD_HARNESS_SHARES = 2.0
# On a GPU the bracket has outliers that no statistic of the run predicts: honest evaluations took
# the trusted figure 40 to 88 us above their truth (docs/benchmarks/adversarial.md), and on 26 Nov
# three honest ones in two H100 runs were flagged 43-55 us above their report. The evaluator then
# uses the trusted figure, against the candidate; an honest control may be flagged by that much.
GPU_BRACKET_OUTLIER_MS = 0.1


@dataclass(frozen=True)
class Alternative:
    status: str
    reason: str = "*"
    max_speedup: float | None = None
    honest: bool = False

    def __str__(self) -> str:
        if self.status == "passed":
            return "passed" if self.honest else f"passed<={self.max_speedup}"
        return f"{self.status}/{self.reason}"


@dataclass(frozen=True)
class Case:
    path: Path
    klass: str
    problem: str
    expect: tuple[Alternative, ...]

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def source(self) -> str:
        return self.path.read_text()

    @property
    def honest(self) -> bool:
        return any(a.honest for a in self.expect)



def _field(doc: str, name: str, path: Path) -> str:
    match = re.search(rf"^{name}:\s*(.+)$", doc, re.MULTILINE)
    if match is None:
        raise ValueError(f"{path}: the docstring has no '{name}:' line")
    return match.group(1).strip()


def parse_expect(text: str) -> tuple[Alternative, ...]:
    out = []
    for part in (p.strip() for p in text.split("|")):
        if part == "passed":
            out.append(Alternative("passed", honest=True))
        elif part.startswith("passed<="):
            out.append(Alternative("passed", max_speedup=float(part.removeprefix("passed<="))))
        elif "/" in part:
            status, reason = part.split("/", 1)
            out.append(Alternative(status, reason))
        else:
            raise ValueError(f"bad expectation {part!r}")
    return tuple(out)


def load(folder: Path) -> list[Case]:
    cases = []
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        doc = path.read_text().split('"""')[1]
        cases.append(
            Case(
                path,
                _field(doc, "Class", path),
                _field(doc, "Problem", path),
                parse_expect(_field(doc, "Expect", path)),
            )
        )
    return cases


def explained_gap(evaluation: Any) -> bool:
    """An evaluation whose report the trusted clock topped by no more than the measurement explains:
    on the CPU a cold harness (``COLD_HARNESS_SHARES`` of the harness's calibrated share of a call),
    on a GPU the bracket's outliers (``GPU_BRACKET_OUTLIER_MS``). Never a trusted figure below the
    report: that is a report too slow, which no honest harness makes."""
    trust = evaluation.trust
    if trust is None:
        return False
    figures = (trust.reported_ms, trust.external_ms, trust.overhead_ms)
    if any(f is None for f in figures):
        return False
    reported, external, overhead = figures
    bound = COLD_HARNESS_SHARES * overhead if evaluation.device == "cpu" else GPU_BRACKET_OUTLIER_MS
    return 0.0 <= external - reported <= bound


def verdict_of(evaluation: Any) -> str:
    return f"{evaluation.status.value}/{evaluation.reason or '-'}"


def judge(case: Case, evaluation: Any) -> tuple[bool, str]:
    """Did ``evaluation`` meet the case's expectation? (ok, what was seen)."""
    status, reason = evaluation.status.value, evaluation.reason
    speedup = evaluation.speedups.get("eager")
    seen = verdict_of(evaluation) + (f" at {speedup:.2f}x" if speedup else "")
    if evaluation.flags:
        seen += f" flags={','.join(evaluation.flags)}"
    for alt in case.expect:
        if (alt.status, alt.reason, status) == ("rejected", "timing_forged", "passed"):
            trusted_figure_used = "timing_mismatch" in evaluation.flags
            if trusted_figure_used and speedup is not None and speedup <= WITHIN_NOISE_SPEEDUP:
                return True, seen
            continue
        if alt.status != status:
            continue
        if status == "passed":
            if alt.honest and ("timing_mismatch" not in evaluation.flags or explained_gap(evaluation)):
                return True, seen
            if alt.max_speedup is not None and speedup is not None and speedup <= alt.max_speedup:
                return True, seen
            continue
        if alt.reason in ("*", reason):
            return True, seen
    return False, seen
