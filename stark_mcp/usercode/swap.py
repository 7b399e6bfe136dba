"""``stark_mcp.swap``: put an exported drop-in kernel in place of a submodule of a model.

::

    from mylib.fast_mlp import ModelNew        # written by `stark-mcp export` (drop-in mode)
    stark_mcp.swap(model, "encoder.mlp", ModelNew)

The exported module's ``from_module(original)`` builds ``ModelNew`` with the constructor
arguments it was proven with, loads ``original``'s ``state_dict`` (strict: the same names and
shapes) and refuses a module whose device or parameter dtype differs from what was proven.
Without stark-mcp installed, the same line is ``model.encoder.mlp = from_module(model.encoder.mlp)``.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from torch import nn

from stark_mcp.usercode.errors import SwapError


def swap(model: nn.Module, path: str, replacement: Any) -> nn.Module:
    """Replace ``model``'s submodule at the dotted ``path`` with a drop-in built from it.

    ``replacement`` is an exported ``ModelNew`` class or its module. Returns the new submodule.
    """
    if not path:
        raise SwapError(
            "swap needs the dotted path of a submodule, e.g. 'encoder.mlp'; to replace a whole "
            "model call from_module(model) from the exported file"
        )
    exported = _exported_module(replacement)
    build = getattr(exported, "from_module", None)
    if not callable(build):
        raise SwapError(
            f"{exported.__name__} has no from_module(original); export the kernel as a drop-in "
            "(stark-mcp export RUN --out mylib/fast.py for a problem made by stark-mcp problem new)"
        )
    try:
        original = model.get_submodule(path)
    except AttributeError as exc:
        raise SwapError(f"model has no submodule {path!r}: {exc}") from None
    parent_path, _, attribute = path.rpartition(".")
    parent = model.get_submodule(parent_path) if parent_path else model
    new = build(original)
    setattr(parent, attribute, new)
    return new


def _exported_module(replacement: Any) -> ModuleType:
    if isinstance(replacement, ModuleType):
        return replacement
    module = sys.modules.get(getattr(replacement, "__module__", ""), None)
    if module is None:
        raise SwapError(
            f"cannot tell which exported file {replacement!r} comes from; pass the ModelNew "
            "class imported from it, or the module itself"
        )
    return module
