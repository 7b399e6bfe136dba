"""Reading records from a process that runs only the problem's own code.

Whatever goes wrong in such a process (the reference run, the problem check) is the
problem's fault, never a candidate's: every failure becomes a ``ProblemError`` that
names the problem and what happened.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from stark_mcp.evaluator.logs import trim_tail
from stark_mcp.evaluator.process import ChannelError, ChildProcess
from stark_mcp.problems import ProblemError


async def next_trusted_record(child: ChildProcess, problem_name: str, deadline: float, *,
                              what: str, late: str) -> dict[str, Any]:
    """The next record before ``deadline`` (monotonic); ``late`` completes "did not ... in time"."""
    timeout = max(0.0, deadline - time.monotonic())
    try:
        record = await child.next_record(timeout)
    except asyncio.TimeoutError:
        raise ProblemError(f"{problem_name}: the {what} did not {late}") from None
    except ChannelError as exc:
        raise ProblemError(f"{problem_name}: the {what} process sent garbage: {exc}") from None
    if record is None:
        code, sig = await child.exit_status()
        raise ProblemError(f"{problem_name}: the {what} process died ({sig or f'exit code {code}'}):\n"
                           f"{child.log(2000)}")
    if record["kind"] == "error":
        raise ProblemError(f"{problem_name}: {record.get('reason')} failed in the {what}: "
                           f"{record.get('message')}\n{trim_tail(str(record.get('traceback', '')), 2000)}")
    return record
