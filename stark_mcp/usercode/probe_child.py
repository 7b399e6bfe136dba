"""Run as ``python -P -m stark_mcp.usercode.probe_child``: import a target and describe it.

Reads one JSON request on stdin ``{"target", "search_paths", "captures"}`` and prints one line
``STARK-PROBE <json>`` on stdout (the user's code may print too). Only this short-lived
process ever imports the user's code on behalf of ``problem new``; the server never does.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import sys
import traceback
from typing import Any

from stark_mcp.usercode import CAPTURE_SWITCH

MARKER = "STARK-PROBE "
MAX_SOURCE_CHARS = 20_000


def main() -> None:
    request = json.loads(sys.stdin.readline())
    os.environ[CAPTURE_SWITCH] = "off"
    sys.path[:0] = [p for p in request["search_paths"] if p not in sys.path]
    try:
        reply = probe(request)
    except Exception as exc:  # noqa: BLE001 - the user's code can raise anything; the parent reports it
        reply = {"error": f"{type(exc).__name__}: {exc}", "traceback": _tail(traceback.format_exc())}
    sys.stdout.write("\n" + MARKER + json.dumps(reply) + "\n")
    sys.stdout.flush()


def probe(request: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = {"captures": [describe_capture(path) for path in request["captures"]]}
    target = request["target"] or _capture_target(reply["captures"])
    if target is None:
        return reply
    reply["target"] = target
    module_name, _, qualname = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            reply["import_error"] = {"kind": "not_found", "message": f"No module named {missing!r}"}
        else:
            reply["import_error"] = {
                "kind": "raised",
                "message": f"ModuleNotFoundError: {exc}",
                "traceback": _tail(traceback.format_exc()),
            }
        return reply
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is the user's code failing too
        reply["import_error"] = {
            "kind": "raised",
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": _tail(traceback.format_exc()),
        }
        return reply
    obj: Any = module
    for part in qualname.split("."):
        if not hasattr(obj, part):
            reply["missing_attribute"] = {"name": part, "available": _public_names(module)}
            return reply
        obj = getattr(obj, part)
    reply.update(describe_target(module, obj))
    return reply


def describe_target(module: Any, obj: Any) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"module_file": _file_of(module)}
    if inspect.isclass(obj):
        info["kind"] = "module" if issubclass(obj, torch.nn.Module) else "class"
        info["init_params"] = _params(obj, drop_first=False)
        info["forward_params"] = _params(getattr(obj, "forward", None), drop_first=True)
    elif callable(obj):
        info["kind"] = "function"
        info["forward_params"] = _params(obj, drop_first=False)
        info["init_params"] = []
    else:
        info["kind"] = type(obj).__name__
        return info
    defined_in = sys.modules.get(getattr(obj, "__module__", ""), None)
    info["defined_in"] = getattr(obj, "__module__", None)
    info["defined_file"] = _file_of(defined_in) if defined_in is not None else None
    path = info["defined_file"]
    info["defined_sha256"] = _sha256(path) if path else None
    try:
        source = inspect.getsource(obj)
        cut = len(source) > MAX_SOURCE_CHARS
        info["source"] = source[:MAX_SOURCE_CHARS] + ("\n# ...(cut)\n" if cut else "")
    except (OSError, TypeError):
        info["source"] = None
    return info


def describe_capture(path: str) -> dict[str, Any]:
    import torch

    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return {"path": path, "error": f"cannot read {path}: {exc.strerror or exc}"}
    digest = hashlib.sha256(data).hexdigest()
    try:
        import io

        call = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the same clear refusal
        first = str(exc).splitlines()[0] if str(exc) else ""
        return {
            "path": path,
            "error": f"{path} is not a capture file torch can load safely: {type(exc).__name__}: {first}",
        }
    from stark_mcp.usercode.capture import CAPTURE_FORMAT

    if not isinstance(call, dict) or call.get("format") != CAPTURE_FORMAT:
        return {"path": path, "error": f"{path} was not written by stark_mcp.capture"}
    return {
        "path": path,
        "sha256": digest,
        "target": call["target"],
        "kind": call["kind"],
        "args": [_value(v) for v in call["args"]],
        "kwargs": {k: _value(v) for k, v in call["kwargs"].items()},
        "init_args": repr(call["init_args"]) if call["init_args"] is not None else None,
        "init_kwargs": repr(call["init_kwargs"]) if call["init_kwargs"] is not None else None,
        "init_note": call.get("init_note", ""),
        "module_dtype": call.get("module_dtype"),
        "device": call.get("device"),
    }


def _value(value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        floating = value.is_floating_point()
        finite = bool(torch.isfinite(value).all()) if floating and value.numel() else True
        return {
            "tensor": True,
            "shape": list(value.shape),
            "dtype": str(value.dtype).removeprefix("torch."),
            "fresh": floating and finite and value.numel() > 1,
        }
    text = repr(value)
    shown = text if len(text) <= 200 else text[:200] + "..."
    return {"tensor": False, "type": type(value).__name__, "repr": shown}


def _sha256(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _capture_target(captures: list[dict[str, Any]]) -> str | None:
    return next((c["target"] for c in captures if "target" in c), None)


def _params(fn: Any, drop_first: bool) -> list[dict[str, Any]] | None:
    if fn is None:
        return None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if drop_first and params and params[0].kind in positional:
        params = params[1:]  # self
    return [
        {"name": p.name, "kind": p.kind.name.lower(), "has_default": p.default is not p.empty} for p in params
    ]


def _file_of(module: Any) -> str | None:
    path = getattr(module, "__file__", None)
    return os.path.realpath(path) if path else None


def _public_names(module: Any) -> list[str]:
    names = [
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(v) or inspect.isfunction(v))
        and getattr(v, "__module__", None) == module.__name__
    ]
    return sorted(names)[:40]


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


if __name__ == "__main__":
    main()
