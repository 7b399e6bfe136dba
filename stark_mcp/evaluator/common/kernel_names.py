"""A profiled kernel's name as a profiler prints it, cut down to what the candidate's source calls
it. Both sides read profiles (the worker parses Nsight Compute's report, the parent classifies
kernels as the candidate's own or a library's), so this lives here. Standard library only."""

from __future__ import annotations


def qualified_name(profiled: str) -> str:
    """``void ns::my_kernel<float>(float const*, int)`` -> ``ns::my_kernel<float>``."""
    head = profiled.split("(", 1)[0].strip()
    return head[5:] if head.startswith("void ") else head


def base_name(profiled: str) -> str:
    """``void ns::my_kernel<float>(float const*, int)`` -> ``my_kernel``."""
    depth, out = 0, []
    for ch in qualified_name(profiled):  # drop template arguments, which may themselves contain '::'
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).split("::")[-1].strip()
