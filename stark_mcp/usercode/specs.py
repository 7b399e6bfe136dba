"""Input specs, constructor arguments and shapes, as records and as compact text (pure).

Compact forms, shared by the CLI and the MCP tool:
  input     ``x:float32[batch,seq,512]``, ``ids:int64[batch,seq]~randint(0,32000)``,
            ``mask:bool[batch,seq]~bernoulli(0.9)``, ``w:float16[64]~uniform(-1,1)``, ``eps=1e-5``
            (a plain value). Dimensions are integers or names of shape keys.
  call      ``512, 2048, dropout=0.0``: constructor arguments as in a Python call, literals only
  shape     ``batch=8,seq=128``: one input set's keyword arguments
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stark_mcp import python_ast
from stark_mcp.usercode.errors import SpecError

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")
DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool")
Distribution = Literal["normal", "uniform", "randint", "bernoulli", "ones", "zeros"]
MAX_ELEMENTS = 2**31 - 1
_DIST_ARGS: dict[str, tuple[str, ...]] = {
    "normal": ("mean", "std"),
    "uniform": ("low", "high"),
    "randint": ("low", "high"),
    "bernoulli": ("p",),
    "ones": (),
    "zeros": (),
}
_INPUT = re.compile(
    r"^\s*(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<dtype>\w+)\s*\[(?P<dims>[^\]]*)\]"
    r"\s*(?:~\s*(?P<dist>\w+)\s*(?:\((?P<args>[^)]*)\))?)?\s*$"
)
# Names get_inputs' body uses; a shape key (a parameter of get_inputs) must not hide them.
_PROBLEM_NAMES = frozenset({"torch", "copy", "call", "capture"})
_VALUE = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*=(?P<value>.+)$", re.DOTALL)


class InputSpec(BaseModel):
    """One forward argument: a random tensor (``shape`` given) or a plain value."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="the forward parameter it feeds, e.g. x")
    shape: list[int | str] | None = Field(
        None, description="dimensions: integers, or names of shape keys such as batch; omit for a plain value"
    )
    dtype: str = Field("float32", description=f"one of {', '.join(DTYPES)}")
    dist: Distribution | None = Field(
        None,
        description="normal (floats, default), uniform, randint (integers), bernoulli (bool), ones, zeros",
    )
    mean: float = 0.0
    std: float = 1.0
    low: float | None = Field(None, description="uniform / randint lower bound (randint default 0)")
    high: float | None = Field(None, description="uniform / randint upper bound (exclusive for randint)")
    p: float = Field(0.5, description="bernoulli: probability of True")
    value: Any = Field(None, description="for a plain (non-tensor) argument: its value")

    @model_validator(mode="after")
    def _consistent(self) -> InputSpec:
        _check_name(self.name, "input")
        if self.shape is None:
            check_literal(self.value, f"input {self.name}")
            return self
        if self.dtype not in DTYPES:
            raise ValueError(
                f"input {self.name}: unknown dtype {self.dtype!r}; use one of {', '.join(DTYPES)}"
            )
        for dim in self.shape:
            if isinstance(dim, bool) or (isinstance(dim, int) and dim < 0):
                raise ValueError(
                    f"input {self.name}: dimension {dim!r} must be a size >= 0 or a shape key name"
                )
            if isinstance(dim, str):
                _check_name(dim, f"input {self.name}: dimension")
                if dim in _PROBLEM_NAMES:
                    raise ValueError(
                        f"input {self.name}: dimension name {dim!r} is taken by the problem "
                        "file; choose another"
                    )
        dist = self.effective_dist
        allowed = _allowed_dists(self.dtype)
        if dist not in allowed:
            raise ValueError(f"input {self.name}: {self.dtype} takes {' or '.join(allowed)}, not {dist}")
        if dist == "randint" and self.high is None:
            raise ValueError(
                f"input {self.name}: an integer tensor needs an upper bound, e.g. "
                f"{self.name}:{self.dtype}[...]~randint(0,32000)"
            )
        if dist in ("randint", "uniform"):
            low = self.low if self.low is not None else 0.0
            high = self.high if self.high is not None else 1.0
            if not high > low:
                raise ValueError(f"input {self.name}: {dist} needs low < high, got {low} and {high}")
            if dist == "randint" and not (float(low).is_integer() and float(high).is_integer()):
                raise ValueError(f"input {self.name}: randint bounds must be whole numbers")
        if dist == "normal" and not self.std > 0:
            raise ValueError(f"input {self.name}: normal needs std > 0, got {self.std}")
        if dist == "bernoulli" and not 0.0 <= self.p <= 1.0:
            raise ValueError(f"input {self.name}: bernoulli needs 0 <= p <= 1, got {self.p}")
        return self

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    @property
    def effective_dist(self) -> str:
        if self.dist is not None:
            return self.dist
        if self.dtype == "bool":
            return "bernoulli"
        return "randint" if self.dtype in INT_DTYPES else "normal"

    def dims_for(self, shape: dict[str, Any]) -> list[int]:
        """Concrete dimensions for one input set."""
        assert self.shape is not None
        return [shape[d] if isinstance(d, str) else d for d in self.shape]

    def describe(self, shape: dict[str, Any] | None = None) -> str:
        """``x: float32[8, 128, 512]`` (with a shape) or ``x: float32[batch, seq, 512]``; ``eps=1e-05``."""
        if self.shape is None:
            return f"{self.name}={self.value!r}"
        dims = self.dims_for(shape) if shape is not None else self.shape
        return f"{self.name}: {self.dtype}[{', '.join(str(d) for d in dims)}]"


def _allowed_dists(dtype: str) -> tuple[str, ...]:
    if dtype == "bool":
        return ("bernoulli", "ones", "zeros")
    if dtype in INT_DTYPES:
        return ("randint", "ones", "zeros")
    return ("normal", "uniform", "ones", "zeros")


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("__") or name == "self":
        raise ValueError(f"{what} name {name!r} is not a usable Python parameter name")


def check_literal(value: Any, what: str) -> None:
    """Values written into the problem file: numbers, strings, booleans, None and containers of them."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what}: {value!r} cannot be written as a literal")
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            check_literal(item, what)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            check_literal(key, what)
            check_literal(item, what)
        return
    raise ValueError(
        f"{what}: {type(value).__name__} is not a plain value; give numbers, strings, booleans, None or "
        "lists, tuples and dicts of them (tensors come from input specs or a capture)"
    )


def input_spec(value: InputSpec | dict[str, Any] | str) -> InputSpec:
    """An InputSpec from a record, a dict or the compact text form; SpecError with the reason."""
    if isinstance(value, InputSpec):
        return value
    try:
        if isinstance(value, str):
            return _parse_input(value)
        return InputSpec.model_validate(value)
    except ValidationError as exc:
        raise SpecError(_first_error(exc, value)) from None
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def _parse_input(text: str) -> InputSpec:
    match = _INPUT.match(text)
    if match is None:
        plain = _VALUE.match(text)
        if plain is None:
            raise ValueError(
                f"input {text!r}: expected NAME:DTYPE[DIMS] with an optional ~distribution(args), e.g. "
                "x:float32[batch,seq,512] or ids:int64[batch,seq]~randint(0,32000), or NAME=VALUE"
            )
        return InputSpec(name=plain["name"], value=_literal(plain["value"], f"input {plain['name']}"))
    dims_text = match["dims"].strip()
    dims: list[int | str] = []
    for part in (p.strip() for p in dims_text.split(",")) if dims_text else ():
        if re.fullmatch(r"\d+", part):
            dims.append(int(part))
        elif part.isidentifier():
            dims.append(part)
        else:
            raise ValueError(
                f"input {match['name']}: dimension {part!r} is neither a size nor a shape key name"
            )
    fields: dict[str, Any] = {"name": match["name"], "dtype": match["dtype"], "shape": dims}
    if match["dist"]:
        dist = match["dist"]
        if dist not in _DIST_ARGS:
            raise ValueError(
                f"input {match['name']}: unknown distribution {dist!r}; use one of {', '.join(_DIST_ARGS)}"
            )
        fields["dist"] = dist
        args_text = (match["args"] or "").strip()
        values = [_literal(a, f"input {match['name']}") for a in args_text.split(",")] if args_text else []
        names = _DIST_ARGS[dist]
        if dist == "randint" and len(values) == 1:
            values = [0, values[0]]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if len(values) > len(names) or not numbers:
            wanted = ", ".join(names) or "no arguments"
            raise ValueError(f"input {match['name']}: {dist} takes {wanted}, got ({args_text})")
        fields.update(zip(names, values, strict=False))
    return InputSpec(**fields)


def _literal(text: str, what: str) -> Any:
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError(f"{what}: {text.strip()!r} is not a Python literal") from None


def parse_call(text: str) -> tuple[list[Any], dict[str, Any]]:
    """``512, 2048, dropout=0.0`` -> ``([512, 2048], {"dropout": 0.0})``; literals only."""
    if not text.strip():
        return [], {}
    try:
        call = python_ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise SpecError(
            f"arguments {text!r} do not read as a Python call's arguments, e.g. 512, 2048, dropout=0.0"
        ) from None
    assert isinstance(call, ast.Call)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    try:
        for node in call.args:
            if isinstance(node, ast.Starred):
                raise SpecError(f"arguments {text!r}: *unpacking is not supported; list the values")
            args.append(ast.literal_eval(node))
        for kw in call.keywords:
            if kw.arg is None:
                raise SpecError(f"arguments {text!r}: **unpacking is not supported; name each argument")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except ValueError:
        raise SpecError(
            f"arguments {text!r}: only literals (numbers, strings, booleans, None, lists, tuples, dicts) "
            "can be written into a problem file"
        ) from None
    return args, kwargs


def parse_shape(text: str) -> dict[str, Any]:
    """``batch=8,seq=128`` -> ``{"batch": 8, "seq": 128}``."""
    args, kwargs = parse_call(text)
    if args or not kwargs:
        raise SpecError(f"shape {text!r}: give keyword arguments, e.g. batch=8,seq=128")
    return kwargs


def check_inputs_fit_shapes(inputs: list[InputSpec], shapes: list[dict[str, Any]]) -> None:
    """Every named dimension is a key of every shape holding a size; every key feeds some input."""
    names = [spec.name for spec in inputs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SpecError(f"input name(s) {', '.join(duplicates)} given more than once")
    used = {d for spec in inputs if spec.shape for d in spec.shape if isinstance(d, str)}
    if used and not shapes:
        raise SpecError(
            f"inputs use the dimension name(s) {', '.join(sorted(used))} but no shapes were given; "
            "add shapes such as " + ",".join(f"{n}=8" for n in sorted(used))
        )
    for index, shape in enumerate(shapes):
        missing = sorted(used - set(shape))
        if missing:
            raise SpecError(f"shape {index + 1} ({_show(shape)}) gives no value for {', '.join(missing)}")
        unused = sorted(set(shape) - used)
        if unused:
            raise SpecError(
                f"shape {index + 1} ({_show(shape)}): key(s) {', '.join(unused)} feed no input dimension; "
                "name them in an input's dimensions, e.g. x:float32[" + ",".join(unused) + "]"
            )
        for key in sorted(used):
            size = shape[key]
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise SpecError(f"shape {index + 1} ({_show(shape)}): {key} must be a size (an integer >= 0)")
        for spec in inputs:
            if spec.shape is not None and math.prod(spec.dims_for(shape)) > MAX_ELEMENTS:
                raise SpecError(f"input {spec.describe(shape)} has more than {MAX_ELEMENTS} elements")


def _show(shape: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def _first_error(exc: ValidationError, value: Any) -> str:
    error = exc.errors()[0]
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    location = ".".join(str(p) for p in error.get("loc", ()))
    return message if not location else f"input spec {value!r}: {location}: {message}"
