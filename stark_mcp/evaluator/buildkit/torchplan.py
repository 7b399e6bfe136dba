"""What ``load_inline`` would write and run, taken from the installed torch itself.

torch generates ``main.cpp``/``cuda.cu`` and the ninja file with private helpers whose details
change between releases (implicit headers, ``wrap_pybind_function``, ``-std``, nvcc flags). Instead
of copying them, ``render`` calls the real ``load_inline`` with its final step (``_jit_compile``)
swapped for a recorder, and ``write_ninja`` calls torch's own ninja writer with the build step
swapped out. The plain strategy is torch's real build function on the same files.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .request import ExtensionRequest


class RenderError(Exception):
    """torch refused the request (bad arguments): the same error the candidate's call would raise."""


@dataclass
class Rendered:
    name: str
    sources: list[str]
    build_kwargs: dict[str, Any]  # free-form: arguments of torch's _write_ninja_file_and_build_library


def _ce() -> Any:
    import torch.utils.cpp_extension as ce

    return ce


@contextlib.contextmanager
def _patched(module: Any, **replacements: Any) -> Iterator[None]:
    saved = {k: getattr(module, k) for k in replacements}
    try:
        for k, v in replacements.items():
            setattr(module, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


def ensure_cuda_home() -> None:
    """A CPU build of torch leaves CUDA_HOME unset even where nvcc is installed; compile-only use needs it."""
    ce = _ce()
    if getattr(ce, "CUDA_HOME", None):
        return
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if not home:
        nvcc = shutil.which("nvcc")
        if nvcc:
            home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    if home:
        ce.CUDA_HOME = home


def render(request: ExtensionRequest, src_dir: str) -> Rendered:
    """Write the sources exactly as ``load_inline`` would into ``src_dir``; nothing is compiled."""
    ce = _ce()
    os.makedirs(src_dir, exist_ok=True)
    captured: dict[str, Any] = {}  # free-form: the keyword arguments torch passed, as it passed them
    jit_params = list(inspect.signature(ce._jit_compile).parameters)

    def record(*args: Any, **kwargs: Any) -> None:
        bound = dict(zip(jit_params, args, strict=False))
        bound.update(kwargs)
        captured.update(bound)

    kwargs = request.load_inline_kwargs()
    params = inspect.signature(ce.load_inline).parameters
    if "no_implicit_headers" in kwargs and "no_implicit_headers" not in params:
        raise RenderError("load_inline() got an unexpected keyword argument 'no_implicit_headers'")
    if "use_pch" in params:
        kwargs["use_pch"] = False
    kwargs["build_directory"] = src_dir
    # use_pch=False makes load_inline delete torch's own precompiled header; that is not ours to touch.
    with _patched(ce, _jit_compile=record, remove_extension_h_precompiler_headers=lambda: None):
        try:
            ce.load_inline(**kwargs)
        except (ValueError, TypeError, AssertionError) as exc:
            raise RenderError(f"{type(exc).__name__}: {exc}") from exc
    if not captured:
        raise RenderError("load_inline did not reach its build step")
    write_params = set(inspect.signature(ce._write_ninja_file_and_build_library).parameters)
    build_kwargs = {k: v for k, v in captured.items() if k in write_params}
    for key in (
        "extra_cflags",
        "extra_cuda_cflags",
        "extra_sycl_cflags",
        "extra_ldflags",
        "extra_include_paths",
    ):
        if key in write_params and build_kwargs.get(key) is None:
            build_kwargs[key] = []
    build_kwargs["verbose"] = False
    if "is_standalone" in write_params:
        build_kwargs["is_standalone"] = False
    if request.uses_cuda:
        ensure_cuda_home()
    return Rendered(name=str(captured["name"]), sources=list(captured["sources"]), build_kwargs=build_kwargs)


def write_ninja(rendered: Rendered, build_dir: str) -> str:
    """torch's build.ninja for these sources, in ``build_dir``; returns its path. Runs no compiler."""
    ce = _ce()
    kwargs = dict(rendered.build_kwargs, build_directory=build_dir)
    with _patched(ce, _run_ninja_build=lambda *a, **k: None):
        ce._write_ninja_file_and_build_library(**kwargs)
    return os.path.join(build_dir, "build.ninja")


def build_plain(rendered: Rendered, build_dir: str) -> None:
    """torch's own build (ninja), as ``load_inline`` runs it; raises torch's RuntimeError on failure."""
    ce = _ce()
    ce._write_ninja_file_and_build_library(**dict(rendered.build_kwargs, build_directory=build_dir))


def library_name(rendered: Rendered) -> str:
    return rendered.name + _ce().LIB_EXT
