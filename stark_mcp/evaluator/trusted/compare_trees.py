"""The trees ``compare.py`` compares, typed: the reference's output (``encode_reference``), the
candidate's description once validated (``validate_tree``), or a shape's structure alone
(``shapes.OutputNode``: no tensors). Plain dicts at run time. Standard library and torch only.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

import torch


class TensorNode(TypedDict):
    k: Literal["tensor"]
    t: NotRequired[torch.Tensor | None]  # the tensor itself (None: the candidate published none)
    dtype: str
    shape: list[int]
    device: str


class SeqNode(TypedDict):
    k: Literal["seq"]
    type: str
    items: list[Tree]


class ScalarNode(TypedDict):
    k: Literal["scalar"]
    v: bool | int | float | None


class NamedNode(TypedDict):
    k: Literal["other", "subclass"]
    type: str  # compared by this class name only


Tree: TypeAlias = "TensorNode | SeqNode | ScalarNode | NamedNode"
