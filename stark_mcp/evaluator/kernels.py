"""Which profiled GPU kernels are the candidate's own (pure)."""

from __future__ import annotations

import re
from collections.abc import Iterable

_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+(\w+)")
_TRITON = re.compile(r"@triton\.(?:jit|autotune)[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")


def own_kernel_names(source: str) -> set[str]:
    """Kernel names the candidate source defines: CUDA ``__global__`` and ``@triton.jit`` functions."""
    return set(_GLOBAL.findall(source)) | set(_TRITON.findall(source))


def base_name(profiled: str) -> str:
    """``void ns::my_kernel<float>(float const*, int)`` -> ``my_kernel``."""
    head = profiled.split("(", 1)[0].strip()
    if head.startswith("void "):
        head = head[5:]
    depth, out = 0, []
    for ch in head:  # drop template arguments, which may themselves contain '::'
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).split("::")[-1].strip()


def own_kernel_share(kernels: Iterable[tuple[str, float]], source: str) -> float | None:
    """Share of device time in the candidate's own kernels; None when nothing ran on the device."""
    own = own_kernel_names(source)
    total = mine = 0.0
    for name, device_us in kernels:
        total += device_us
        if base_name(name) in own:
            mine += device_us
    if total <= 0:
        return None
    return mine / total
