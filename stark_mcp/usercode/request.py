"""``ProblemRequest``: everything ``create_problem`` / ``stark-mcp problem new`` is asked (pure)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from stark_mcp.usercode.errors import SpecError
from stark_mcp.usercode.specs import (
    FLOAT_DTYPES,
    InputSpec,
    check_inputs_fit_shapes,
    check_literal,
    input_spec,
)
from stark_mcp.usercode.target import TargetRef, parse_target

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


class ProblemRequest(BaseModel):
    """A problem from the user's code: a target plus how to build it and feed it."""

    target: str | None = Field(
        None, description="package.module:ClassOrFunction; may be omitted when captures name it"
    )
    project_root: str | None = Field(
        None, description="the user's project folder (absolute); its src/ or itself holds the package"
    )
    import_roots: list[str] = Field(
        default_factory=list,
        description="folders to import the package from, instead of guessing from project_root",
    )
    init_args: list[Any] = Field(
        default_factory=list, description="constructor positional arguments (literals)"
    )
    init_kwargs: dict[str, Any] = Field(default_factory=dict, description="constructor keyword arguments")
    inputs: list[InputSpec] = Field(default_factory=list, description="forward arguments, in call order")
    shapes: list[dict[str, Any]] = Field(
        default_factory=list, description="input sets, each giving the sizes named in the inputs' dimensions"
    )
    captures: list[str] = Field(default_factory=list, description="capture files from stark_mcp.capture")
    captured_values: bool = Field(
        False, description="with captures: feed every captured value as is (default: fresh floats like them)"
    )
    module_dtype: str | None = Field(None, description="convert the module's parameters to this dtype")
    name: str | None = None
    out: str | None = Field(None, description="where to write the problem file")
    overwrite: bool = False

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs(cls, value: Any) -> Any:
        return [input_spec(v) for v in value] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _consistent(self) -> ProblemRequest:
        if self.target is not None:
            parse_target(self.target)
        if self.captures and (self.inputs or self.shapes):
            raise SpecError(
                "give either captures or input specs (with shapes), not both: a captured call "
                "already fixes its inputs, and each capture file is one input set"
            )
        if not self.captures and not self.inputs:
            raise SpecError(
                "no inputs: give input specs such as x:float32[batch,64] with shapes such as "
                "batch=8, or capture files from stark_mcp.capture"
            )
        if not self.captures and self.target is None:
            raise SpecError("no target: give package.module:ClassOrFunction")
        if self.captured_values and not self.captures:
            raise SpecError("captured_values applies to capture files only")
        try:
            check_literal(self.init_args, "constructor argument")
            check_literal(self.init_kwargs, "constructor argument")
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        for key in self.init_kwargs:
            if not key.isidentifier():
                raise SpecError(f"constructor keyword {key!r} is not a Python parameter name")
        check_inputs_fit_shapes(self.inputs, self.shapes)
        if self.module_dtype is not None and self.module_dtype not in FLOAT_DTYPES:
            raise SpecError(f"module dtype {self.module_dtype!r}: use one of {', '.join(FLOAT_DTYPES)}")
        if self.name is not None and not _NAME.match(self.name):
            raise SpecError(f"problem name {self.name!r}: use letters, digits, '_', '-' and '.'")
        return self

    @property
    def target_ref(self) -> TargetRef | None:
        return parse_target(self.target) if self.target else None
