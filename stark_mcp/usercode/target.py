"""``package.module:ClassOrFunction``: what to optimize, named the way an import reaches it (pure)."""

from __future__ import annotations

import keyword
import os

from pydantic import BaseModel, ConfigDict

from stark_mcp.usercode.errors import TargetError

# Names the problem file defines itself; a target called one of these is imported under an alias.
RESERVED = frozenset(
    {
        "Model",
        "ModelNew",
        "get_inputs",
        "get_init_inputs",
        "torch",
        "nn",
        "copy",
        "hashlib",
        "io",
        "os",
        "sys",
        "Path",
        "SHAPES",
        "SIGNATURES",
        "INIT_INPUTS",
        "STARK_IMPORT_ROOTS",
        "STARK_TARGET",
        "TARGET_FILE",
        "CAPTURES",
    }
)


class TargetRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    module: str
    qualname: str

    @property
    def spec(self) -> str:
        return f"{self.module}:{self.qualname}"

    @property
    def top_package(self) -> str:
        return self.module.split(".", 1)[0]

    @property
    def local_name(self) -> str:
        """The name the problem file binds the target to."""
        last = self.qualname.rsplit(".", 1)[-1]
        return f"{last}Target" if last in RESERVED else last


def parse_target(text: str) -> TargetRef:
    """``mylib.layers:ScaledMLP`` (or ``mylib.layers:Outer.Inner``); a clear TargetError otherwise."""
    value = text.strip()
    example = "e.g. mylib.layers:ScaledMLP (the module's import path, a colon, the class or function)"
    if ":" not in value:
        hint = ""
        if "." in value:
            module, _, name = value.rpartition(".")
            hint = f"; did you mean {module}:{name}?"
        raise TargetError(f"target {text!r} needs the form package.module:Name, {example}{hint}")
    module, _, qualname = value.partition(":")
    if module.endswith(".py") or "/" in module or os.sep in module:
        raise TargetError(f"target {text!r}: give the module's import path (mylib.layers), not a file path")
    for label, dotted in (("module", module), ("name", qualname)):
        parts = dotted.split(".")
        if not dotted or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
            raise TargetError(f"target {text!r}: {label} {dotted!r} is not a dotted Python name, {example}")
    if module == "__main__":
        raise TargetError(
            f"target {text!r} lives in a script run as __main__, which other processes cannot import; "
            "move it into a module of your package"
        )
    return TargetRef(module=module, qualname=qualname)
