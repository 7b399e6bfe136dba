#!/usr/bin/env python3
"""Where the test suite's CPU time goes, by kind of process: ``python3 tools/suite_profile.py [PYTEST ARGS]``.

Runs ``python3 -m pytest -q`` (with the given arguments; none: the whole suite as `.ci/run` runs it)
while a sampler reads ``/proc`` four times a second, and prints a markdown table: for each kind of
process (candidate and baseline runners, trusted workers, builders, compile jails, the compilers,
pytest's own workers, ...) the CPU seconds it used, how many there were, and its share; then the
wall time, the CPU time of the whole machine from ``/proc/stat`` and how busy that kept it. Linux
only. Every process of the machine is counted, so run it on an otherwise idle one. A process is
charged what it used while the run lasted, as of when it was last seen, so one living under 0.25 s
may be missed; the machine's total is exact, and the last line says how much of it the sampler saw.

``--json FILE`` keeps the numbers. The issue-15 page (docs/benchmarks/suite.md) gives the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

INTERVAL_S = 0.25
# The first needle found in a process's command line names its kind (order matters: a compile jail's
# command line names its request's folder, which may sit under pytest's temporary directory).
KINDS = (
    ("stark_mcp.evaluator.untrusted.runner", "runner (candidate or baseline)"),
    ("stark_mcp.evaluator.trusted.worker", "trusted worker"),
    ("stark_mcp.evaluator.untrusted.builder", "builder jail"),
    ("compile_main.py", "compile jail (Python)"),
    ("cc1plus", "cc1plus"),
    ("exec(eval(sys.stdin.readline()))", "pytest worker (tests in process)"),
    ("-m pytest", "pytest"),
    ("ray", "ray"),
    ("chrom", "chromium"),
    ("stark_mcp", "other stark_mcp process (CLI, server, probe)"),
    ("stark-mcp", "other stark_mcp process (CLI, server, probe)"),
    ("bwrap", "bubblewrap"),
    ("python", "other Python"),
)
# What the zygote forks keeps its command line: the name it gives each child says what it is.
ZYGOTE = "stark_mcp.evaluator.sandbox.zygote"
FORKED = {
    "stark-zygote": "zygote",
    "stark-worker": "trusted worker",
    "stark-runner": "runner (candidate or baseline)",
    "stark-jail": "forked jail's session and init",
    "stark-jail-init": "forked jail's session and init",
}
UNNAMED = "zygote's child, not named yet"
# Seen mid-exec or before a forked child names itself: look again next time.
RELABEL = {"bubblewrap", "other Python", "other", "(exited)", UNNAMED}


PF_KTHREAD = 0x00200000


def kind_of(argv: list[str], flags: int, comm: str = "") -> str:
    if flags & PF_KTHREAD:
        return "kernel threads"
    if not argv or not argv[0]:
        return "(exited)"  # a zombie: no command line left
    if os.path.basename(argv[0]) == "bwrap":
        return "bubblewrap"  # its command line names the runner it starts
    line = " ".join(argv)
    if ZYGOTE in line:
        return FORKED.get(comm, UNNAMED)
    for needle, kind in KINDS:
        if needle in line:
            return kind
    name = os.path.basename(argv[0])
    return name if name in {"ld", "as", "collect2", "ninja", "gcc", "g++", "c++"} else "other"


class Sampler(threading.Thread):
    """CPU seconds per process (keyed by pid and start time, so a reused pid is a new process)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[tuple[int, str], list] = {}  # (pid, start) -> [kind, cpu seconds, at first sight]
        self.first = True  # processes of the first sample started before pytest: charge only what follows
        self.stop = threading.Event()
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.own = os.getpid()

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.first = False
            self.stop.wait(INTERVAL_S)
        self.sample()

    def sample(self) -> None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == self.own:
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            key = (int(entry), fields[19])
            cpu = (int(fields[11]) + int(fields[12])) / self.ticks
            known = self.seen.get(key)
            if known is None or known[0] in RELABEL:
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as fh:
                        argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
                except OSError:
                    argv = []
                kind = kind_of(argv, int(fields[6]), stat[stat.find("(") + 1 : stat.rfind(")")])
                if known is None:
                    self.seen[key] = known = [kind, cpu, cpu if self.first else 0.0]
                elif kind != "(exited)":
                    known[0] = kind
            known[1] = max(known[1], cpu)

    def table(self) -> dict[str, dict[str, float]]:
        kinds: dict[str, dict[str, float]] = {}
        for kind, cpu, before in self.seen.values():
            row = kinds.setdefault(kind, {"cpu_s": 0.0, "processes": 0})
            row["cpu_s"] += cpu - before
            row["processes"] += 1 if cpu > before or not before else 0
        return kinds


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    if not os.path.exists("/proc/stat"):
        sys.exit("suite_profile.py reads /proc: Linux only")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args, pytest_args = parser.parse_known_args()
    sampler = Sampler()
    cpu0, wall0 = machine_cpu_s(), time.monotonic()
    sampler.start()
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", *pytest_args])
    sampler.stop.set()
    sampler.join()
    wall, machine = time.monotonic() - wall0, machine_cpu_s() - cpu0
    kinds = sampler.table()
    seen = sum(row["cpu_s"] for row in kinds.values())
    cores = os.cpu_count() or 1
    print("\n| process | CPU s | processes | share of what was seen |\n|---|---|---|---|")
    for kind, row in sorted(kinds.items(), key=lambda kv: -kv[1]["cpu_s"]):
        if row["cpu_s"] >= 0.5:
            print(f"| {kind} | {row['cpu_s']:.0f} | {row['processes']} | {row['cpu_s'] / seen:.0%} |")
    print(
        f"\npytest exit {rc}; wall {wall:.0f} s; the machine's CPU {machine:.0f} s on {cores} cores "
        f"({machine / (wall * cores):.0%} busy); the sampler saw {seen:.0f} s of it"
    )
    if args.json:
        args.json.write_text(json.dumps(
            {"rc": rc, "wall_s": wall, "machine_cpu_s": machine, "cores": cores, "kinds": kinds,
             "pytest_args": pytest_args}, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
