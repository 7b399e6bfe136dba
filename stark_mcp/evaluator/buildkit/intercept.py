"""Route ``torch.utils.cpp_extension.load_inline`` through a resolver that builds elsewhere.

``install(resolver)`` replaces ``load_inline`` in this process. A call is turned into an
``ExtensionRequest``, ``resolver(request)`` returns the directory (or the library file) built for
it (or None: the original ``load_inline`` then builds it), and the library is imported exactly
as ``load_inline`` imports it: the same module object, so the candidate's calls behave the same.
Arguments ``load_inline`` would reject raise the same ``TypeError``; a failed build raises
``RuntimeError("Error building extension '<name>': <log>")`` as torch does. Calls with
``sycl_sources`` go to the original function. ``load`` (from files on disk) is left alone: its
sources may include files next to them that a separate builder cannot see.

``local_resolver(cache_dir)`` runs ``compile_main.py`` in a subprocess and caches its output by
``request_key``; the evaluator supplies a sandboxed resolver of its own.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .build_report import REPORT_FILE, BuildReport
from .request import ExtensionRequest, Toolchain, is_cacheable, request_key

PREBUILT_INDEX = "extensions.json"  # in a candidate's build directory: request identity -> library dir
Resolver = Callable[[ExtensionRequest], "str | None"]
COMPILE_MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compile_main.py")

# free-form: the patched function's original and the versions loaded, for this process's lifetime
_state: dict[str, Any] = {"original": None, "versions": {}}
_lock = threading.Lock()


class BuildFailed(RuntimeError):
    """The extension did not build; the message is torch's ``Error building extension`` text."""

    def __init__(self, name: str, log: str) -> None:
        super().__init__(
            f"Error building extension '{name}': {log}" if not log.startswith("Error building") else log
        )
        self.log = log


def install(resolver: Resolver) -> None:
    """Patch ``torch.utils.cpp_extension.load_inline`` in this process to build through ``resolver``."""
    import torch.utils.cpp_extension as ce

    with _lock:
        if _state["original"] is None:
            _state["original"] = ce.load_inline
        original = _state["original"]
    signature = inspect.signature(original)

    @functools.wraps(original)
    def load_inline(*args: Any, **kwargs: Any) -> Any:
        arguments = dict(signature.bind(*args, **kwargs).arguments)  # TypeError like the original
        if arguments.get("sycl_sources"):
            return original(*args, **kwargs)
        request = _versioned(ExtensionRequest.from_load_inline(**arguments))
        built = resolver(request)
        if built is None:  # the resolver has no build for it: torch builds it as it always did
            return original(*args, **kwargs)
        return load_built(request, built)

    load_inline.__stark_buildkit__ = True  # type: ignore[attr-defined]
    ce.load_inline = load_inline


def uninstall() -> None:
    import torch.utils.cpp_extension as ce

    with _lock:
        if _state["original"] is not None:
            ce.load_inline = _state["original"]
            _state["original"] = None
        _state["versions"] = {}


def request_identity(request: ExtensionRequest) -> str:
    """Names one request exactly (every argument, the name after torch-style renaming): the index
    of prebuilt libraries a runner reads is keyed by it."""
    import hashlib

    return hashlib.sha256(request.to_json().encode()).hexdigest()


def _versioned(request: ExtensionRequest) -> ExtensionRequest:
    """torch renames a second, different build of one name in one process to ``name_v1``, ``name_v2``..."""
    import dataclasses

    identity = request.to_json()
    with _lock:
        seen: list[str] = _state["versions"].setdefault(request.name, [])
        if identity not in seen:
            seen.append(identity)
        version = seen.index(identity)
    return request if version == 0 else dataclasses.replace(request, name=f"{request.name}_v{version}")


def library_path(request: ExtensionRequest, built: str) -> str:
    import torch.utils.cpp_extension as ce

    return os.path.join(built, request.name + ce.LIB_EXT) if os.path.isdir(built) else built


def load_built(request: ExtensionRequest, built: str) -> ModuleType | str:
    """Import the built library as ``load_inline`` does: a Python module, or ``torch.ops.load_library``."""
    path = library_path(request, built)
    if not request.is_python_module:
        import torch

        torch.ops.load_library(path)
        return path
    spec = importlib.util.spec_from_file_location(request.name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the built extension {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LocalResolver:
    """Builds with ``compile_main.py`` in a subprocess; caches each output directory by request key."""

    def __init__(
        self,
        cache_dir: str,
        pch_dir: str | None = None,
        strategy: str = "fast",
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        python: str = sys.executable,
    ) -> None:
        self.cache_dir = os.path.abspath(cache_dir)
        self.pch_dir = pch_dir if pch_dir is not None else os.path.join(self.cache_dir, "toolchain")
        self.strategy, self.timeout, self.env, self.python = strategy, timeout, env, python
        self.builds = 0
        self.hits = 0
        self.last_report: BuildReport | None = None

    def __call__(self, request: ExtensionRequest) -> str:
        os.makedirs(self.cache_dir, exist_ok=True)
        key = request_key(request, Toolchain.detect())
        target = os.path.join(self.cache_dir, key)
        report = _read_report(target)
        if (
            report is not None
            and report.ok
            and report.library
            and os.path.exists(os.path.join(target, report.library))
        ):
            self.hits += 1
            self.last_report = report
            return target
        cacheable = is_cacheable(request)
        work = tempfile.mkdtemp(prefix=f"{key}.", suffix=".tmp", dir=self.cache_dir)
        with open(os.path.join(work, "request.json"), "w") as fh:
            fh.write(request.to_json())
        cmd = [
            self.python,
            COMPILE_MAIN,
            os.path.join(work, "request.json"),
            work,
            "--strategy",
            self.strategy,
        ]
        if self.pch_dir:
            cmd += ["--pch-dir", self.pch_dir]
        env = dict(os.environ, **(self.env or {}))
        self.builds += 1
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=self.timeout, env=env)
        report = _read_report(work)
        self.last_report = report
        if report is None:
            shutil.rmtree(work, ignore_errors=True)
            raise BuildFailed(
                request.name, f"compile_main exited with {done.returncode}: {done.stderr[-3000:]}"
            )
        if not report.ok:
            shutil.rmtree(work, ignore_errors=True)
            raise BuildFailed(report.name, report.log)
        if not cacheable:
            return work
        try:
            os.rename(work, target)
        except OSError:  # another process built the same key first; its output is equivalent
            shutil.rmtree(work, ignore_errors=True)
        return target


def _read_report(directory: str) -> BuildReport | None:
    try:
        with open(os.path.join(directory, REPORT_FILE)) as fh:
            return BuildReport.from_dict(json.load(fh))
    except (OSError, ValueError, TypeError):
        return None


def local_resolver(cache_dir: str, **kwargs: Any) -> LocalResolver:
    return LocalResolver(cache_dir, **kwargs)
