"""Loading task and candidate modules, seeding, and moving inputs: shared by every child mode."""

from __future__ import annotations

import copy
import importlib.util
import random
import sys
import traceback
from types import ModuleType
from typing import Any

import torch

BUILD_FAILURE_MARKER = "Error building extension"


class Verdict(Exception):
    """Raised inside a child to end it with a classified error record."""

    def __init__(self, status: str, reason: str, message: str, tb: str = "") -> None:
        super().__init__(message)
        self.status, self.reason, self.message, self.tb = status, reason, message, tb

    def record(self) -> dict[str, Any]:
        return {"kind": "error", "status": self.status, "reason": self.reason,
                "message": self.message, "traceback": self.tb}


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
        return load_module(path, "stark_candidate")
    except SyntaxError as exc:
        raise Verdict("load_error", "syntax", f"syntax error at line {exc.lineno}: {exc.msg}",
                      traceback.format_exc()) from None
    except BaseException as exc:  # SystemExit and friends at import are load failures too
        if isinstance(exc, RuntimeError) and BUILD_FAILURE_MARKER in str(exc):
            raise Verdict("build_error", "compile", str(exc), traceback.format_exc()) from None
        raise Verdict("load_error", "import", f"importing the candidate failed: {describe(exc)}",
                      traceback.format_exc()) from None


def looks_like_cuda_unavailable(text: str) -> bool:
    lowered = text.lower()
    return any(s in lowered for s in (
        "no cuda gpus are available", "found no nvidia driver", "cuda driver initialization failed",
        "torch not compiled with cuda", "cudagetdevicecount", "no cuda-capable device",
    ))


def seed_all(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (2**32))


def to_device(obj: Any, device: str) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(x, device) for x in obj)
    return obj


def to_double(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.double() if obj.is_floating_point() else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_double(x) for x in obj)
    return obj


def make_inputs(problem: ModuleType, seed: int, device: str) -> list[Any]:
    seed_all(seed)
    return list(to_device(list(problem.get_inputs()), device))


def build_model(problem: ModuleType, cls: Any, seed: int, device: str) -> Any:
    """Construct like the reference: the same init seed before get_init_inputs() and the constructor."""
    seed_all(seed)
    init = problem.get_init_inputs()
    model = cls(*init)
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
    return model


def double_model(model: Any) -> Any:
    twin = copy.deepcopy(model)
    return twin.double()


class default_dtype:
    """Temporarily change torch's default dtype (tensors created inside forward follow it)."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __enter__(self) -> None:
        self.saved = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)

    def __exit__(self, *exc: object) -> None:
        torch.set_default_dtype(self.saved)
