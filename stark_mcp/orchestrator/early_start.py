"""What a command that evaluates at once starts before its own start-up work: the evaluator's zygote.

Every process that evaluates forks its trusted workers and its runners' jails from one zygote
(``evaluator/sandbox/zygote.py``), which first imports torch and the worker's modules: 1.5-2.5 s
on an H200 host, seconds more on a small loaded machine. Started by the evaluator, a fresh
``stark-mcp eval`` began that import only after its own imports, the problem's load and the
evaluator's set-up, and its first evaluation then waited for it (``process_start``). Started here,
first thing in the command, it runs beside all that. It is the process's one zygote
(``process_zygote``): the evaluator finds it started and starts none of its own. Light on purpose
(the standard library and the sandbox's launcher only): it is imported before anything heavy.
"""

from __future__ import annotations

import os

from stark_mcp.config import Settings
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.forked import process_zygote
from stark_mcp.evaluator.sandbox.levels import SandboxPolicy


def sandbox_policy(settings: Settings) -> SandboxPolicy:
    return SandboxPolicy(
        isolation=settings.isolation,
        bwrap=str(settings.bwrap) if settings.bwrap else None,
        uid_base=settings.sandbox_uid_base,
    )


def forks(settings: Settings) -> bool:
    """Whether this process's evaluations fork from a zygote (local executor; the policy allows it)."""
    return settings.executor == "local" and sandbox_policy(settings).fork


def start_zygote(settings: Settings) -> None:
    """Start this process's zygote now, where its evaluations would fork from one. Returns at once:
    the zygote imports in the background."""
    if forks(settings):
        process_zygote(scrub_env(os.environ, {}))
