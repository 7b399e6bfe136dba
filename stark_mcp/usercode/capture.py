"""``stark_mcp.capture``: save one real call's inputs, and the constructor's arguments, to a file.

Runs inside the user's own program::

    with stark_mcp.capture("mlp_call.pt", model.encoder.mlp, init_args=[512, 2048]):
        model(batch)                       # the first call of model.encoder.mlp is saved

    @stark_mcp.capture("mlp_call.pt")      # on the class: its constructor's arguments are saved too
    class FusedMLP(nn.Module): ...

    @stark_mcp.capture("gelu_call.pt")     # on a function: its first call is saved
    def fused_gelu(x, approximate="tanh"): ...

``stark-mcp problem new --capture mlp_call.pt`` then makes a problem from the file. The file
is written with ``torch.save`` and holds only what ``torch.load(weights_only=True)`` reads
back (tensors, numbers, strings, booleans, None, dtypes, devices and lists, tuples and dicts
of them), so loading it never runs code; anything else is refused when the call is captured.
Tensors are saved detached, on the CPU. Problem files set ``STARK_CAPTURE=off`` before they
import the user's code, so a decorator left in place never writes from the evaluator.
"""

from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path
from typing import Any, Self

import torch
from torch import nn

from stark_mcp.usercode import CAPTURE_SWITCH
from stark_mcp.usercode.errors import CaptureError
from stark_mcp.usercode.specs import check_literal

CAPTURE_FORMAT = "stark-mcp capture 1"
OFF_ENV = CAPTURE_SWITCH
_INIT_ATTR = "_stark_capture_init"


class capture:
    """Save the first call of ``target`` (a module instance, in a ``with`` block) or of the
    decorated class or function to ``path``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        target: nn.Module | None = None,
        *,
        init_args: list[Any] | tuple[Any, ...] | None = None,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.target = target
        self.init: tuple[list[Any], dict[str, Any]] | None = None
        if init_args is not None or init_kwargs is not None:
            self.init = (list(init_args or ()), dict(init_kwargs or {}))
        self.saved = False
        self._handle: Any = None

    # ---- context manager over a module instance ----------------------------------------------

    def __enter__(self) -> Self:
        if not isinstance(self.target, nn.Module):
            raise CaptureError(
                "with stark_mcp.capture(path, module): give the nn.Module instance whose next call to save; "
                "for a function, decorate it with @stark_mcp.capture(path)"
            )
        self._handle = self.target.register_forward_pre_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        if exc_type is None and not self.saved and not _off():
            name = type(self.target).__name__
            raise CaptureError(
                f"{name}.forward was not called inside the with block; nothing was saved to {self.path}"
            )

    def _hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not self.saved:
            init = self.init or module.__dict__.get(_INIT_ATTR)
            self._save(type(module), "module", args, kwargs, init, module)
            if self._handle is not None:
                self._handle.remove()
                self._handle = None

    # ---- decorator ---------------------------------------------------------------------------

    def __call__(self, obj: Any) -> Any:
        if inspect.isclass(obj) and issubclass(obj, nn.Module):
            return self._wrap_class(obj)
        if inspect.isclass(obj):
            raise CaptureError(f"@capture on class {obj.__qualname__}: it is not a torch.nn.Module")
        if callable(obj):
            return self._wrap_function(obj)
        raise CaptureError(f"@capture needs a module class or a function, not {type(obj).__name__}")

    def _wrap_class(self, cls: type[nn.Module]) -> type[nn.Module]:
        original_init, original_forward = cls.__init__, cls.forward

        @functools.wraps(original_init)
        def __init__(module: nn.Module, *args: Any, **kwargs: Any) -> None:
            original_init(module, *args, **kwargs)
            if type(module) is cls:  # a subclass's own arguments are not this class's
                module.__dict__[_INIT_ATTR] = (list(args), dict(kwargs))

        @functools.wraps(original_forward)
        def forward(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            if not self.saved and type(module) is cls:
                self._save(cls, "module", args, kwargs, self.init or module.__dict__.get(_INIT_ATTR), module)
            return original_forward(module, *args, **kwargs)

        cls.__init__ = __init__  # type: ignore[method-assign]
        cls.forward = forward  # type: ignore[method-assign]
        return cls

    def _wrap_function(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.saved:
                self._save(fn, "function", args, kwargs, None, None)
            return fn(*args, **kwargs)

        return wrapper

    # ---- the file ----------------------------------------------------------------------------

    def _save(
        self,
        obj: Any,
        kind: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        init: tuple[list[Any], dict[str, Any]] | None,
        module: nn.Module | None,
    ) -> None:
        if _off():
            return
        payload: dict[str, Any] = {
            "format": CAPTURE_FORMAT,
            "target": f"{obj.__module__}:{obj.__qualname__}",
            "kind": kind,
            "args": [_storable(a, f"argument {i}") for i, a in enumerate(args)],
            "kwargs": {k: _storable(v, f"argument {k!r}") for k, v in kwargs.items()},
            "init_args": None,
            "init_kwargs": None,
            "init_note": "",
            "module_dtype": None,
            "device": _device_of(args, kwargs, module),
            "torch": str(torch.__version__),
        }
        if kind == "module":
            payload.update(_init_fields(obj, init))
            payload["module_dtype"] = _module_dtype(module)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        torch.save(payload, partial)
        os.replace(partial, self.path)  # a crash mid-write never leaves a torn capture
        self.saved = True


def _off() -> bool:
    return os.environ.get(OFF_ENV, "").strip().lower() in ("off", "0", "false", "no")


def _storable(value: Any, where: str) -> Any:
    """A copy ``torch.load(weights_only=True)`` can read back, or a CaptureError naming the culprit."""
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, nn.Parameter):
            raise CaptureError(
                f"{where} is a {type(value).__name__} (a tensor subclass); pass a plain tensor"
            )
        if value.layout is not torch.strided or value.is_quantized:
            raise CaptureError(f"{where} is a {value.layout} tensor; only dense tensors can be captured")
        return value.detach().to("cpu", copy=True)
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_storable(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise CaptureError(f"{where} is a dict with non-string keys")
        return {k: _storable(v, f"{where}[{k!r}]") for k, v in value.items()}
    raise CaptureError(
        f"cannot capture {where}: it is a {type(value).__module__}.{type(value).__qualname__}; a capture "
        "stores tensors, numbers, strings, booleans, None, dtypes, devices and lists, tuples and dicts "
        "of them"
    )


def _init_fields(cls: type, init: tuple[list[Any], dict[str, Any]] | None) -> dict[str, Any]:
    if init is None:
        return {
            "init_note": (
                f"the constructor arguments of {cls.__qualname__} are unknown: decorate the class with "
                "@stark_mcp.capture(path), or pass init_args=/init_kwargs= to capture"
            )
        }
    args, kwargs = init
    try:
        check_literal(list(args), "constructor argument")
        check_literal(dict(kwargs), "constructor argument")
    except ValueError as exc:
        return {"init_note": f"{exc}; give the constructor arguments to problem new yourself"}
    return {"init_args": list(args), "init_kwargs": dict(kwargs)}


def _module_dtype(module: nn.Module | None) -> str | None:
    if module is None:
        return None
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.is_floating_point():
            return str(tensor.dtype).removeprefix("torch.")
    return None


def _device_of(args: tuple[Any, ...], kwargs: dict[str, Any], module: nn.Module | None) -> str | None:
    tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    if module is not None:
        tensors += list(module.parameters())[:1]
    return str(tensors[0].device) if tensors else None
