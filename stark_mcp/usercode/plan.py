"""Fit a request to what the probe found: constructor and forward arguments, input sets (pure).

The result, a ``ProblemPlan``, is everything the problem file states; ``render`` only writes it.
Mismatches (an unknown constructor keyword, an input the forward cannot take, captures of
different targets) are ``SpecError``s that name the parameter and list the valid ones.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from stark_mcp.problems import shape_label
from stark_mcp.usercode.errors import SpecError
from stark_mcp.usercode.introspect import CapturedValue, CaptureInfo, Param, TargetInfo
from stark_mcp.usercode.request import ProblemRequest
from stark_mcp.usercode.specs import InputSpec
from stark_mcp.usercode.target import TargetRef

_POSITIONAL = ("positional_only", "positional_or_keyword")
_KEYWORD = ("positional_or_keyword", "keyword_only")


class ForwardArg(BaseModel):
    """One argument of ``Model.forward``: its name, whether the target takes it by keyword, where
    its value comes from (an input spec, or a captured call's args/kwargs)."""

    name: str
    keyword: bool = False
    spec: InputSpec | None = None
    captured: Literal["args", "kwargs"] | None = None
    key: int | str | None = None
    tensor: bool = True
    fresh: bool = Field(False, description="captured float tensor fed fresh values like the captured ones")


class CaptureRef(BaseModel):
    name: str
    path: str
    sha256: str


class ProblemPlan(BaseModel):
    name: str
    target: TargetRef
    kind: Literal["module", "function"]
    import_roots: list[str]
    target_file: str | None
    target_sha256: str | None
    target_source: str | None
    init_names: list[str] = Field(default_factory=list)
    init_values: list[Any] = Field(default_factory=list)
    init_keywords: list[str] = Field(default_factory=list, description="init names passed by keyword")
    module_dtype: str | None = Field(None, description="the parameters' dtype (module targets)")
    forward: list[ForwardArg]
    shapes: list[dict[str, Any]] = Field(default_factory=list, description="SHAPES; empty for one input set")
    captures: list[CaptureRef] = Field(default_factory=list)
    signatures: dict[str, str] = Field(description="shape label -> the forward arguments it produces")


def plan_problem(request: ProblemRequest, info: TargetInfo) -> ProblemPlan:
    if request.target and request.target_ref != info.target:
        raise SpecError(f"the target {request.target} and the captures' target {info.target.spec} differ")
    captures = info.captures
    kind = info.kind
    if captures:
        _check_captures_agree(captures, info)
    init_args, init_kwargs = _init(request, captures, kind, info.target)
    names, keywords = _init_names(info, init_args, init_kwargs) if kind == "module" else ([], [])
    if kind == "function" and request.module_dtype:
        raise SpecError(
            f"{info.target.spec} is a function: it has no parameters to convert to {request.module_dtype}"
        )
    module_dtype = (request.module_dtype or _captured_dtype(captures)) if kind == "module" else None
    if captures:
        forward, shapes, refs, signatures = _from_captures(captures, info, request.captured_values)
    else:
        forward = _from_specs(request.inputs, info)
        shapes = [dict(s) for s in request.shapes]
        refs = []
        signatures = {
            shape_label(shape): "; ".join(arg.spec.describe(shape) for arg in forward if arg.spec)
            for shape in (shapes or [{}])
        }
    return ProblemPlan(
        name=request.name or default_name(info.target),
        target=info.target,
        kind=kind,
        import_roots=[info.import_root] if info.import_root else [],
        target_file=info.defined_file,
        target_sha256=info.defined_sha256,
        target_source=info.source,
        init_names=names,
        init_values=[*init_args, *init_kwargs.values()],
        init_keywords=keywords,
        module_dtype=module_dtype,
        forward=forward,
        shapes=shapes,
        captures=refs,
        signatures=signatures,
    )


def default_name(target: TargetRef) -> str:
    """``ScaledMLP`` -> ``scaled_mlp``."""
    last = target.qualname.rsplit(".", 1)[-1]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", last).lower()


# ---- constructor ---------------------------------------------------------------------------------


def _init(
    request: ProblemRequest, captures: list[CaptureInfo], kind: str, target: TargetRef
) -> tuple[list[Any], dict[str, Any]]:
    given = bool(request.init_args or request.init_kwargs)
    if kind == "function":
        if given:
            raise SpecError(f"{target.spec} is a function: it takes no constructor arguments")
        return [], {}
    if given or not captures:
        return list(request.init_args), dict(request.init_kwargs)
    first = captures[0]
    if first.init_args is None:
        raise SpecError(f"{first.path}: {first.init_note or 'no constructor arguments were captured'}")
    return list(first.init_args), dict(first.init_kwargs or {})


def _init_names(info: TargetInfo, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[str], list[str]]:
    params = info.init_params
    cls = info.target.qualname
    if params is None:  # a signature Python cannot read: positions get neutral names
        return [f"arg{i}" for i in range(len(args))] + list(kwargs), list(kwargs)
    positional = [p for p in params if p.kind in _POSITIONAL]
    var_positional = any(p.kind == "var_positional" for p in params)
    var_keyword = any(p.kind == "var_keyword" for p in params)
    if len(args) > len(positional) and not var_positional:
        raise SpecError(
            f"{cls} takes at most {len(positional)} positional constructor argument(s) "
            f"({_names(positional)}), got {len(args)}"
        )
    names = [positional[i].name if i < len(positional) else f"arg{i}" for i in range(len(args))]
    keyword_names = {p.name for p in params if p.kind in _KEYWORD}
    for key in kwargs:
        if key in names:
            raise SpecError(f"{cls}: constructor argument {key!r} given both by position and by keyword")
        if key not in keyword_names and not var_keyword:
            raise SpecError(
                f"{cls} has no constructor parameter {key!r}; its parameters are {_names(params)}"
            )
    covered = set(names) | set(kwargs)
    missing = [p.name for p in _required(params) if p.name not in covered]
    if missing:
        raise SpecError(
            f"{cls} needs constructor argument(s) {', '.join(missing)}; give them as init "
            f"arguments (its parameters are {_names(params)})"
        )
    return names + list(kwargs), list(kwargs)


def _captured_dtype(captures: list[CaptureInfo]) -> str:
    return (captures[0].module_dtype if captures else None) or "float32"


# ---- forward, from input specs ------------------------------------------------------------------


def _from_specs(inputs: list[InputSpec], info: TargetInfo) -> list[ForwardArg]:
    params = info.forward_params
    if params is None:
        return [ForwardArg(name=spec.name, spec=spec, tensor=spec.is_tensor) for spec in inputs]
    positional = [p for p in params if p.kind in _POSITIONAL]
    keyword_names = {p.name for p in params if p.kind in _KEYWORD}
    var_positional = any(p.kind == "var_positional" for p in params)
    var_keyword = any(p.kind == "var_keyword" for p in params)
    forward: list[ForwardArg] = []
    by_position = True
    for index, spec in enumerate(inputs):
        # Taken by position while it is this slot's name, or not a parameter name at all.
        has_slot = index < len(positional) or var_positional
        if by_position and has_slot and spec.name not in keyword_names - {_slot_name(positional, index)}:
            forward.append(ForwardArg(name=spec.name, spec=spec, tensor=spec.is_tensor))
            continue
        by_position = False
        if spec.name not in keyword_names and not var_keyword:
            raise SpecError(
                f"the forward of {info.target.qualname} has no parameter {spec.name!r}; "
                f"its parameters are {_names(params)}"
            )
        forward.append(ForwardArg(name=spec.name, keyword=True, spec=spec, tensor=spec.is_tensor))
    given = {arg.name for arg in forward if arg.keyword}
    given |= {positional[i].name for i, arg in enumerate(forward) if not arg.keyword and i < len(positional)}
    missing = [p.name for p in _required(params) if p.name not in given]
    if missing:
        raise SpecError(
            f"the forward of {info.target.qualname} needs {', '.join(missing)}, which no input "
            f"gives (its parameters are {_names(params)})"
        )
    return forward


# ---- forward and input sets, from captures ------------------------------------------------------


def _check_captures_agree(captures: list[CaptureInfo], info: TargetInfo) -> None:
    first = captures[0]
    for other in captures:
        if other.target != info.target.spec:
            raise SpecError(f"{other.path} captured {other.target}, not {info.target.spec}")
        if other is first:
            continue
        if (other.init_args, other.init_kwargs) != (first.init_args, first.init_kwargs):
            raise SpecError(
                f"{other.path} and {first.path} were captured from modules built with different "
                "constructor arguments; one problem has one module"
            )
        if _layout(other) != _layout(first):
            raise SpecError(
                f"{other.path} and {first.path} call the forward with different arguments "
                f"({_show_layout(first)} vs {_show_layout(other)}); sizes may differ, "
                "the rest not"
            )


def _layout(capture: CaptureInfo) -> list[tuple[str, bool, str]]:
    items = [(str(i), v.tensor, v.dtype) for i, v in enumerate(capture.args)]
    return items + [(k, v.tensor, v.dtype) for k, v in capture.kwargs.items()]


def _show_layout(capture: CaptureInfo) -> str:
    return ", ".join(f"{k}:{dtype or 'value'}" for k, _tensor, dtype in _layout(capture))


def _from_captures(
    captures: list[CaptureInfo], info: TargetInfo, keep_values: bool
) -> tuple[list[ForwardArg], list[dict[str, Any]], list[CaptureRef], dict[str, str]]:
    first = captures[0]
    params = info.forward_params or []
    positional = [p.name for p in params if p.kind in _POSITIONAL]
    taken = set(first.kwargs)
    forward: list[ForwardArg] = []
    for index, value in enumerate(first.args):
        name = positional[index] if index < len(positional) else f"arg{index}"
        while name in taken:
            name += "_"
        taken.add(name)
        forward.append(_captured_arg(name, "args", index, value, captures, keep_values))
    for key, value in first.kwargs.items():
        if not key.isidentifier():
            raise SpecError(f"{first.path}: keyword argument {key!r} is not a Python name")
        forward.append(_captured_arg(key, "kwargs", key, value, captures, keep_values, keyword=True))
    refs = _capture_refs(captures)
    shapes = [{"capture": ref.name} for ref in refs] if len(refs) > 1 else []
    signatures = {}
    for ref, capture in zip(refs, captures, strict=True):
        label = shape_label({"capture": ref.name}) if len(refs) > 1 else shape_label({})
        values = [*capture.args, *capture.kwargs.values()]
        signatures[label] = "; ".join(v.describe(arg.name) for arg, v in zip(forward, values, strict=False))
    return forward, shapes, refs, signatures


def _captured_arg(
    name: str,
    where: Literal["args", "kwargs"],
    key: int | str,
    value: CapturedValue,
    captures: list[CaptureInfo],
    keep_values: bool,
    keyword: bool = False,
) -> ForwardArg:
    def same(c: CaptureInfo) -> CapturedValue:
        return c.args[key] if isinstance(key, int) else c.kwargs[key]

    fresh = value.tensor and not keep_values and all(same(c).fresh for c in captures)
    return ForwardArg(name=name, keyword=keyword, captured=where, key=key, tensor=value.tensor, fresh=fresh)


def _capture_refs(captures: list[CaptureInfo]) -> list[CaptureRef]:
    refs: list[CaptureRef] = []
    used: set[str] = set()
    for capture in captures:
        base = re.sub(r"\W", "_", Path(capture.path).stem) or "call"
        name, n = base, 2
        while name in used:
            name, n = f"{base}_{n}", n + 1
        used.add(name)
        refs.append(CaptureRef(name=name, path=str(Path(capture.path).resolve()), sha256=capture.sha256))
    return refs


def _required(params: list[Param]) -> list[Param]:
    return [p for p in params if not p.has_default and p.kind not in ("var_positional", "var_keyword")]


def _slot_name(positional: list[Param], index: int) -> str | None:
    return positional[index].name if index < len(positional) else None


def _names(params: list[Param]) -> str:
    shown = []
    for p in params:
        prefix = "*" if p.kind == "var_positional" else "**" if p.kind == "var_keyword" else ""
        shown.append(prefix + p.name)
    return ", ".join(shown) or "none"
