"""Importing the module under test and constructing its model, exactly as the reference was built.

Runs inside sandboxed processes (runners and builders). Nothing here is trusted by the worker: a
candidate controls this process and may rewrite any of it. These helpers exist to give honest
candidates accurate verdicts and clear messages; the defences live in the trusted worker.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
import traceback
from types import ModuleType
from typing import Any

import torch

from stark_mcp.evaluator.common.reference_wire import ModelInit, RngState
from stark_mcp.evaluator.common.runner_wire import SetupError

BUILD_FAILURE_MARKER = "Error building extension"


class Verdict(Exception):
    """Ends the process's work with a classified error frame."""

    def __init__(self, status: str, reason: str, message: str, tb: str = "") -> None:
        super().__init__(message)
        self.status, self.reason, self.message, self.tb = status, reason, message, tb

    def frame(self) -> SetupError:
        return {
            "kind": "error",
            "status": self.status,
            "reason": self.reason,
            "message": self.message[:4000],
            "traceback": self.tb[-8000:],
        }


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def load_module(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def import_candidate(path: str) -> ModuleType:
    """Import the candidate, turning failures into build_error or load_error verdicts."""
    try:
        return load_module(path, "candidate")
    except SyntaxError as exc:
        raise Verdict(
            "load_error", "syntax", f"syntax error at line {exc.lineno}: {exc.msg}", traceback.format_exc()
        ) from None
    except BaseException as exc:  # SystemExit and friends at import are load failures too
        if BUILD_FAILURE_MARKER in str(exc):
            raise Verdict("build_error", "compile", str(exc), traceback.format_exc()) from None
        raise Verdict(
            "load_error", "import", f"importing the candidate failed: {describe(exc)}", traceback.format_exc()
        ) from None


def install_prebuilt(build_dir: str | None) -> bool:
    """Serve ``load_inline`` calls from the libraries the parent built for this candidate.

    The parent writes ``<build_dir>/extensions.json`` after the builder's run; a call it names loads
    that library, any other call (a module built by its runner, a source that changed between two
    imports) goes to torch's own ``load_inline``. Returns whether an index was found."""
    if not build_dir:
        return False
    from stark_mcp.evaluator.buildkit import intercept

    path = os.path.join(build_dir, intercept.PREBUILT_INDEX)
    try:
        with open(path) as fh:
            index = json.load(fh)
    except (OSError, ValueError):
        return False
    if not isinstance(index, dict):
        return False

    def resolve(request: Any) -> str | None:
        where = index.get(intercept.request_identity(request))
        return os.path.join(build_dir, where) if isinstance(where, str) else None

    intercept.install(resolve)
    return True


def looks_like_cuda_unavailable(text: str) -> bool:
    lowered = text.lower()
    return any(
        s in lowered
        for s in (
            "no cuda gpus are available",
            "found no nvidia driver",
            "cuda driver initialization failed",
            "torch not compiled with cuda",
            "cudagetdevicecount",
            "no cuda-capable device",
        )
    )


def restore_rng(state: RngState) -> None:
    """The RNG state the worker had right before it constructed the reference."""
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
    if state.get("python") is not None:
        version, internal, gauss = state["python"]
        random.setstate((int(version), tuple(int(x) for x in internal), gauss))


def construct(cls: Any, init: ModelInit, device: str) -> Any:
    restore_rng(init["rng"])
    model = cls(*init["args"])
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
    return model


def poison_cuda_allocator(fraction: float = 0.25, cap_bytes: int = 2 << 30) -> None:
    """Leave the caching allocator's free blocks full of 0xFF (NaN in every float dtype), so an output
    the kernel never writes reads as NaN rather than as whatever was there."""
    free, _total = torch.cuda.mem_get_info()
    budget = min(int(free * fraction), cap_bytes)
    blocks = []
    size = 512 << 20
    while size >= (1 << 20) and budget > 0:
        if size <= budget:
            t = torch.empty(size, dtype=torch.uint8, device="cuda")
            t.fill_(255)
            blocks.append(t)
            budget -= size
        size //= 2
    for _ in range(16):  # small-pool segments (allocations under 1 MiB come from 2 MiB segments)
        t = torch.empty(1 << 19, dtype=torch.uint8, device="cuda")
        t.fill_(255)
        blocks.append(t)
    torch.cuda.synchronize()
    del blocks
