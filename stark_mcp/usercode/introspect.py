"""Learn what a target is by importing it in a short-lived subprocess (``probe_child``).

The user's code never runs in the server's or the CLI's own process: an import can hang, print,
change global state or crash. Here it gets its own interpreter, ``-P`` (no current directory on
``sys.path``, as in the evaluator), a timeout, and is killed when the caller is cancelled.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from stark_mcp.usercode import CAPTURE_SWITCH
from stark_mcp.usercode.errors import CaptureError, TargetError
from stark_mcp.usercode.target import TargetRef, parse_target

PROBE_TIMEOUT_S = 120.0
MARKER = "STARK-PROBE "


class Param(BaseModel):
    name: str
    kind: Literal["positional_only", "positional_or_keyword", "var_positional", "keyword_only", "var_keyword"]
    has_default: bool


class CapturedValue(BaseModel):
    tensor: bool
    shape: list[int] = Field(default_factory=list)
    dtype: str = ""
    fresh: bool = Field(False, description="floating, finite, more than one element: fresh values fit it")
    type: str = ""
    repr: str = ""

    def describe(self, name: str) -> str:
        if self.tensor:
            return f"{name}: {self.dtype}[{', '.join(str(d) for d in self.shape)}]"
        return f"{name}={self.repr}"


class CaptureInfo(BaseModel):
    path: str
    sha256: str
    target: str
    kind: str
    args: list[CapturedValue]
    kwargs: dict[str, CapturedValue]
    init_args: list[Any] | None = None
    init_kwargs: dict[str, Any] | None = None
    init_note: str = ""
    module_dtype: str | None = None
    device: str | None = None


class TargetInfo(BaseModel):
    """What the probe found: the target's kind and signatures, where it lives, its source."""

    target: TargetRef
    kind: Literal["module", "function"]
    module_file: str | None
    defined_file: str | None
    defined_sha256: str | None
    init_params: list[Param] | None = Field(None, description="constructor parameters; None if unknown")
    forward_params: list[Param] | None = Field(None, description="forward (or the function's) parameters")
    source: str | None = None
    import_root: str | None = Field(
        None, description="the search path it was imported from; None if installed"
    )
    captures: list[CaptureInfo] = Field(default_factory=list)


def search_paths(project_root: Path, explicit: list[str]) -> list[str]:
    """Where to look for the user's package: the given roots, else ``<project>/src`` and ``<project>``."""
    if explicit:
        paths = [Path(p).expanduser() for p in explicit]
        for path in paths:
            if not path.is_absolute():
                raise TargetError(f"import root {str(path)!r} must be an absolute folder path")
            if not path.is_dir():
                raise TargetError(f"import root {path} is not a folder")
        return [str(p) for p in paths]
    candidates = [project_root / "src", project_root]
    return [str(p) for p in candidates if p.is_dir()]


async def inspect_target(
    target: TargetRef | None,
    paths: list[str],
    captures: list[str],
    *,
    timeout: float = PROBE_TIMEOUT_S,
    cwd: Path | None = None,
) -> TargetInfo:
    """Import ``target`` (or the captures' target when None) and describe it; TargetError or
    CaptureError with what went wrong and where it looked."""
    request = {"target": target.spec if target else None, "search_paths": paths, "captures": captures}
    reply = await _run_probe(request, timeout, cwd)
    capture_infos = [_capture(c) for c in reply.get("captures", [])]
    spec = reply.get("target")
    if spec is None:
        raise TargetError("no target given and no capture names one: pass package.module:Name")
    ref = parse_target(spec)
    where = ", ".join(paths) if paths else "(no project folders)"
    if "import_error" in reply:
        err = reply["import_error"]
        if err["kind"] == "not_found":
            raise TargetError(
                f"cannot import {ref.module}: {err['message']}; looked in {where} and the installed "
                "packages. Pass the folder that holds the package as the project root (or --root DIR)"
            )
        detail = f"{err['message']}\n{err.get('traceback', '')}".rstrip()
        raise TargetError(f"importing {ref.module} failed: {detail}")
    if "missing_attribute" in reply:
        missing = reply["missing_attribute"]
        available = ", ".join(missing["available"]) or "no public classes or functions"
        raise TargetError(f"{ref.module} has no attribute {missing['name']!r}; it defines {available}")
    if "error" in reply:
        detail = f"{reply['error']}\n{reply.get('traceback', '')}".rstrip()
        raise TargetError(f"probing {ref.spec} failed: {detail}")
    kind = reply.get("kind")
    if kind == "class":
        raise TargetError(
            f"{ref.spec} is a class but not a torch.nn.Module; give a module class or a function"
        )
    if kind not in ("module", "function"):
        raise TargetError(f"{ref.spec} is a {kind}, not a torch.nn.Module class or a function")
    return TargetInfo(
        target=ref,
        kind=kind,
        module_file=reply.get("module_file"),
        defined_file=reply.get("defined_file"),
        defined_sha256=reply.get("defined_sha256"),
        init_params=_params(reply.get("init_params")),
        forward_params=_params(reply.get("forward_params")),
        source=reply.get("source"),
        import_root=_root_of(ref.module, reply.get("module_file"), paths),
        captures=capture_infos,
    )


def _root_of(module: str, module_file: str | None, paths: list[str]) -> str | None:
    """The search path the module was found under; None when it came from the installed packages."""
    if not module_file:
        return None
    file = Path(module_file)
    depth = module.count(".") + (2 if file.name == "__init__.py" else 1)
    root = file.parents[depth - 1] if depth <= len(file.parents) else None
    if root is None:
        return None
    for path in paths:
        if os.path.realpath(path) == str(root):
            return path
    return None


def _params(raw: list[dict[str, Any]] | None) -> list[Param] | None:
    return None if raw is None else [Param(**p) for p in raw]


def _capture(raw: dict[str, Any]) -> CaptureInfo:
    if "error" in raw:
        raise CaptureError(raw["error"])
    fields = dict(raw)
    for key in ("init_args", "init_kwargs"):
        # Sent as repr so tuples stay tuples; the capture only ever stored literals there.
        fields[key] = ast.literal_eval(raw[key]) if raw.get(key) is not None else None
    return CaptureInfo(**fields)


async def _run_probe(request: dict[str, Any], timeout: float, cwd: Path | None) -> dict[str, Any]:
    command = [sys.executable, "-P", "-m", "stark_mcp.usercode.probe_child"]
    env = {**os.environ, CAPTURE_SWITCH: "off", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        with anyio.fail_after(timeout):
            done = await anyio.run_process(
                command,
                input=(json.dumps(request) + "\n").encode(),
                check=False,
                env=env,
                cwd=str(cwd) if cwd else None,
            )
    except TimeoutError:
        what = request["target"] or "the capture"
        raise TargetError(f"importing {what} took more than {timeout:.0f} s") from None
    stdout = done.stdout.decode("utf-8", "replace")
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        stderr = done.stderr.decode("utf-8", "replace").strip()
        tail = "\n".join(stderr.splitlines()[-12:])
        raise TargetError(
            f"importing {request['target'] or 'the capture'} ended the process (exit code {done.returncode}) "
            f"before it could be described:\n{tail}".rstrip()
        )
    return json.loads(line[len(MARKER) :])
