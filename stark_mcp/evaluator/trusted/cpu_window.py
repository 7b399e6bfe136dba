"""The candidate jail's CPU between two freezes (``CpuWindow``): CPU that processes which ended
between two reads used, which no live clock shows, charged to the window's timed calls. Standard
library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stark_mcp.evaluator.sandbox.process_tree import JailCpu
from stark_mcp.evaluator.trusted import timing

# CPU that processes which ended between two freezes may have used without a charge: the cgroup counts
# in microseconds, the live clocks in nanoseconds. Honest candidates leave no dead processes at all.
WINDOW_ALLOWANCE_NS = 20_000


@dataclass
class CpuWindow:
    """The candidate jail's CPU between two freezes: its cgroup's total against its live processes'.

    Each call's bracket is read from the clocks of the jail's live processes, which see a process that
    ended in between only through its parent's tick-granular child times: work done in a child that
    lives for one call (a clone sharing its memory, a fork) would be missed by every call's median.
    The jail's cgroup counts every process that ever ran in it, to the microsecond; frozen, the two
    agree but for the processes that ended. Their CPU (less an allowance) is spread over the window's
    timed calls. Work of the live processes between calls is the harness's, on both runners alike."""

    start: JailCpu | None = None
    calls: int = 0
    timed: list[int] = field(default_factory=list)  # indices of the window's timed samples
    hidden_ns: int = 0  # charged in this shape's timing loop, for the finding
    charged_calls: int = 0

    def settle(self, frozen: JailCpu | None, cand: timing.Samples) -> None:
        if frozen is None:
            return
        if self.start is not None and self.calls:
            excess = frozen.ended_since(self.start) - WINDOW_ALLOWANCE_NS
            if excess > 0 and self.timed:
                per_call_ms = excess / self.calls / 1e6
                for i in self.timed:
                    cand.bracket_ms[i] += per_call_ms
                self.hidden_ns += excess
                self.charged_calls += len(self.timed)
        self.start, self.calls, self.timed = frozen, 0, []
