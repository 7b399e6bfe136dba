"""Counts the Triton compilations and autotuning benchmarks a candidate's process makes.

The runner reports the running count with every call, so the worker can tell whether calls it
timed still compiled or autotuned (a key or a specialization that changes from call to call), and
can keep warming up a shape while its calls still do. Like the other reports of this process it is
information, not a defence: a candidate can hide a compilation, which only hides it from itself.
Standard library only; Triton is looked at only once it is loaded (by the candidate, or ahead of it
by a spare runner on a GPU).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

# Where a kernel is compiled (Triton 3.x) and where autotuning times one configuration (2.x, 3.x).
_COUNTED = (
    ("triton.runtime.jit", "JITFunction", "_do_compile"),
    ("triton.runtime.autotuner", "Autotuner", "_bench"),
)


class JitWatch:
    def __init__(self) -> None:
        self.count = 0
        self.installed = False

    def install(self) -> bool:
        """Count from now on, if the candidate imported Triton; True when something is counted."""
        if "triton" not in sys.modules or self.installed:
            return self.installed
        for module_name, class_name, method in _COUNTED:
            owner = getattr(sys.modules.get(module_name), class_name, None)
            original = getattr(owner, method, None)
            if owner is None or original is None:
                continue
            setattr(owner, method, self._counting(original))
            self.installed = True
        jit = getattr(sys.modules.get("triton.runtime.jit"), "JITFunction", None)
        if jit is not None and not hasattr(jit, "_do_compile") and getattr(jit, "cache_hook", 1) is None:
            jit.cache_hook = self._hook  # Triton 2.x calls it before each compilation
            self.installed = True
        return self.installed

    def _counting(self, original: Any) -> Any:
        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(*args, **kwargs)

        return counted

    def _hook(self, *args: Any, **kwargs: Any) -> bool:
        self.count += 1
        return False  # False: compile as usual
