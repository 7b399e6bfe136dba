"""A jail's processes from outside: the tree under a process, each one's CPU clock, the jail's CPU
read two ways while frozen (``JailCpu``), and a signal that may find its process gone. Standard
library only.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class JailCpu:
    """A frozen jail's CPU time two ways: its cgroup's total, and each live process's own clock."""

    group_ns: int
    live_ns: dict[int, int]

    def ended_since(self, earlier: JailCpu) -> int:
        """CPU time spent since ``earlier`` by processes no live clock shows any more: children that
        ended in between (a process started since then counts in full; a pid reused by a new process
        lowers the live sum, which only raises this figure)."""
        live = sum(ns - earlier.live_ns.get(pid, 0) for pid, ns in self.live_ns.items())
        return self.group_ns - earlier.group_ns - live


def process_cpu_ns(pid: int, children: bool = True) -> int:
    """CPU time of one process, its threads (live and ended) and, with ``children``, its reaped
    children, in ns; 0 when it is gone. The process clock is exact for a task on a core; the
    children's share is in ticks."""
    try:
        own = time.clock_gettime_ns(((~pid) << 3) | 2)  # the process's CPUCLOCK_SCHED clock id
    except OSError:
        return 0
    if not children:
        return own
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        children = (int(fields[13]) + int(fields[14])) * (1_000_000_000 // _TICKS)
    except (OSError, ValueError, IndexError):
        children = 0
    return own + children


_TICKS = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (through /proc/<pid>/task/*/children)."""
    out: list[int] = []
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            stack.extend(kids)
    return out


def signal_quietly(pid: int, sig: signal.Signals) -> None:
    """Send ``sig``; a process that is gone, or no longer ours to signal, is let be."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

