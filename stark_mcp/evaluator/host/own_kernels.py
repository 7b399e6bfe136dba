"""Which kernels a candidate writes, and which profiled GPU kernels are its own (pure).

A candidate's own kernels are the CUDA ``__global__`` functions in its source and the Python
functions it decorates with ``@triton.jit`` (or ``triton.autotune`` / ``triton.heuristics`` over
one), under any name it imports triton by. Kernels of torch and the libraries it ships (ATen,
cuBLAS, cuDNN, CUTLASS, CUB, and the Triton kernels Inductor generates for ``torch.compile``) are
never its own, even when a candidate names one of its kernels after them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Set

from stark_mcp import python_ast
from stark_mcp.evaluator.common.kernel_names import base_name, qualified_name

_GLOBAL = re.compile(r"\b__global__\b")
# What may stand between ``__global__`` and a kernel's name: ``void`` and other declaration
# specifiers, in any order (``__global__ void __launch_bounds__(256) k(``, ``static __global__ void
# k(``, ``void __global__ k(``), with attribute groups removed first (``_ATTRIBUTES``).
_KERNEL_NAME = re.compile(
    r"\s*(?:(?:void|static|inline|__inline__|__forceinline__|__noinline__|extern|\"C\")\s+)*(\w+)\s*\("
)
_ATTRIBUTES = re.compile(
    r"(?:__launch_bounds__|__attribute__|__cluster_dims__|__maxnreg__)\s*(\((?:[^()]|\([^()]*\))*\))"
)
_TRITON = re.compile(r"@triton\.(?:jit|autotune|heuristics)[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")
_TRITON_DECORATORS = {"jit", "autotune", "heuristics"}
# Profiled names in these namespaces, or with these prefixes, belong to torch or a vendor library.
_LIBRARY_NAMESPACES = ("at::", "c10::", "cub::", "cutlass::", "thrust::", "cudnn", "cublas", "flash::")
_LIBRARY_PREFIXES = ("triton_poi_", "triton_per_", "triton_red_", "triton_tem_", "triton_for_")
# Triton before 3.0 appended the argument specialization to a kernel's name: add_kernel_0d1d2de.
_TRITON_SUFFIX = re.compile(r"^(\w+?)_(?:\d+[dce]*)+$")


def triton_kernel_names(source: str, parsed: ast.Module | SyntaxError | None = None) -> set[str]:
    """Functions the source decorates as Triton kernels (the regex fallback covers a source that
    does not parse). ``parsed``: the source's parse, or its SyntaxError, where the caller has it."""
    tree = python_ast.parse_or_error(source) if parsed is None else parsed
    if isinstance(tree, SyntaxError):
        return set(_TRITON.findall(source))
    modules, direct = {"triton"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "triton":
                    modules.add(alias.asname or "triton")
        elif isinstance(node, ast.ImportFrom) and node.module in ("triton", "triton.runtime"):
            for alias in node.names:
                if alias.name in _TRITON_DECORATORS:
                    direct.add(alias.asname or alias.name)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (
                isinstance(target, ast.Attribute)
                and target.attr in _TRITON_DECORATORS
                and isinstance(target.value, ast.Name)
                and target.value.id in modules
            ) or (isinstance(target, ast.Name) and target.id in direct):
                found.add(node.name)
                break
    return found


def cuda_kernel_names(source: str) -> set[str]:
    """Names of the ``__global__`` functions in a source. The launch bounds were the common miss:
    ``__global__ void __launch_bounds__(256) k(...)`` puts them between ``void`` and the name."""
    names = set()
    for match in _GLOBAL.finditer(source):
        rest = _ATTRIBUTES.sub(" ", source[match.end() : match.end() + 400])
        found = _KERNEL_NAME.match(rest)
        if found is not None and found.group(1) != "void":
            names.add(found.group(1))
    return names


def own_kernel_names(source: str, parsed: ast.Module | SyntaxError | None = None) -> set[str]:
    """Kernel names the candidate source defines: CUDA ``__global__`` and Triton functions."""
    return cuda_kernel_names(source) | triton_kernel_names(source, parsed)


def is_library_kernel(profiled: str) -> bool:
    """A kernel of torch or a vendor library, whatever the candidate's own kernels are called."""
    qualified = qualified_name(profiled)
    return qualified.startswith(_LIBRARY_NAMESPACES) or base_name(profiled).startswith(_LIBRARY_PREFIXES)


def is_own_kernel(profiled: str, own: Set[str]) -> bool:
    if is_library_kernel(profiled):
        return False
    name = base_name(profiled)
    if name in own:
        return True
    legacy = _TRITON_SUFFIX.match(name)
    return legacy is not None and legacy.group(1) in own


def own_kernel_share(kernels: Iterable[tuple[str, float]], source: str) -> float | None:
    """Share of device time in the candidate's own kernels; None when nothing ran on the device."""
    return kernel_share(kernels, own_kernel_names(source))


def kernel_share(kernels: Iterable[tuple[str, float]], own: Set[str]) -> float | None:
    """Share of device time in the kernels named ``own``; None when nothing ran on the device."""
    total = mine = 0.0
    for name, device_us in kernels:
        total += device_us
        if is_own_kernel(name, own):
            mine += device_us
    if total <= 0:
        return None
    return mine / total
