"""What a problem's declared shapes look like as data: the layout of a call's inputs and outputs.

Both sides of the reference jail's wire use it: the jail (``evaluator/reference/``) walks the
problem's objects into these trees, and the trusted worker rebuilds the objects from them and lays
out its runners' regions by them. Pure data, JSON on the wire. Standard library and torch only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

import torch

from stark_mcp.evaluator.common.regions import dtype_name, dtype_of, nbytes_of

TensorSpecs = list[tuple[list[int], torch.dtype]]


# -- a call's inputs: what ``input_tree`` makes; runners rebuild the call's arguments from it ----------


class TensorInput(TypedDict):
    k: Literal["tensor"]
    leaf: int  # its index in the call's tensor leaves (and in the slot's ``Leaf`` list)


class ArgInput(TypedDict):
    k: Literal["arg"]
    i: int  # its index in the call's non-tensor arguments (sent with GO)


class SeqInput(TypedDict):
    k: Literal["seq"]
    type: Literal["list", "tuple"]
    items: list[InputNode]


InputNode = TensorInput | ArgInput | SeqInput


# -- a forward's output: what ``output_tree`` makes of the reference's, without values ---------------


class TensorOutput(TypedDict):
    k: Literal["tensor"]
    leaf: NotRequired[int]  # its index in the output leaves (``without_leaves`` drops it)
    dtype: str
    shape: list[int]
    device: str


class SeqOutput(TypedDict):
    k: Literal["seq"]
    type: str  # tuple, list, or a named tuple's class name
    items: list[OutputNode]


class ScalarOutput(TypedDict):
    k: Literal["scalar"]
    v: bool | int | float | None


class OtherOutput(TypedDict):
    k: Literal["other"]
    type: str  # the object's class name: compared by name only


OutputNode = TensorOutput | SeqOutput | ScalarOutput | OtherOutput


class ShapeSpecFrame(TypedDict):
    """``ShapeSpec`` as the reference jail's ``probe`` answer carries it."""

    label: str
    kwargs: dict[str, Any]  # free-form: the problem's own SHAPES entry (user metadata, made JSON)
    tree: InputNode
    tensors: list[list[Any]]  # [[shape, dtype name], ...] (``specs_to_wire``)
    arg_count: int
    output_tree: OutputNode
    outputs: list[list[Any]]
    inputs_repeat: bool
    outputs64: list[list[Any]] | None


@dataclass
class ShapeSpec:
    """One declared shape: how its inputs are laid out and what its outputs look like."""

    label: str
    kwargs: dict[str, Any]  # free-form: the problem's own SHAPES entry (user metadata)
    tree: InputNode  # input structure: tensor leaves by index, non-tensor args by position
    tensors: TensorSpecs  # input tensor leaves (shape, dtype)
    arg_count: int
    output_tree: OutputNode  # the reference's output structure (encoded, without values)
    outputs: TensorSpecs  # output tensor leaves
    input_bytes: int = 0
    output_bytes: int = 0
    # get_inputs() gave the same values under two different seeds: every call then repeats them,
    # and a candidate that memoizes on input values is fast without working (its speedup is void).
    inputs_repeat: bool = False
    outputs64: TensorSpecs | None = None  # the float64 twin's output leaves (None: it did not run)

    def to_wire(self) -> ShapeSpecFrame:
        return {
            "label": self.label,
            "kwargs": self.kwargs,
            "tree": self.tree,
            "tensors": specs_to_wire(self.tensors),
            "arg_count": self.arg_count,
            "output_tree": self.output_tree,
            "outputs": specs_to_wire(self.outputs),
            "inputs_repeat": self.inputs_repeat,
            "outputs64": None if self.outputs64 is None else specs_to_wire(self.outputs64),
        }

    @classmethod
    def from_wire(cls, data: ShapeSpecFrame) -> ShapeSpec:
        tensors, outputs = specs_from_wire(data["tensors"]), specs_from_wire(data["outputs"])
        outputs64 = data.get("outputs64")
        return cls(
            label=str(data["label"]),
            kwargs=dict(data["kwargs"]),
            tree=dict(data["tree"]),  # type: ignore[arg-type]  (a copy of the same node)
            tensors=tensors,
            arg_count=int(data["arg_count"]),
            output_tree=dict(data["output_tree"]),  # type: ignore[arg-type]
            outputs=outputs,
            input_bytes=sum(nbytes_of(s, d) for s, d in tensors),
            output_bytes=sum(nbytes_of(s, d) for s, d in outputs),
            inputs_repeat=bool(data["inputs_repeat"]),
            outputs64=None if outputs64 is None else specs_from_wire(outputs64),
        )


def specs_of(tensors: list[torch.Tensor]) -> TensorSpecs:
    return [(list(t.shape), t.dtype) for t in tensors]


def specs_to_wire(specs: TensorSpecs) -> list[list[Any]]:
    return [[list(shape), dtype_name(dtype)] for shape, dtype in specs]


def specs_from_wire(data: list[list[Any]]) -> TensorSpecs:
    return [([int(d) for d in shape], dtype_of(str(dtype))) for shape, dtype in data]


def label(kwargs: dict[str, Any]) -> str:  # free-form: a SHAPES entry (user metadata)
    """``batch=8,dims=2x3``: the same text as ``problems.declarations.shape_label`` (which the
    evaluator may not import), so the labels results carry match the ones the problem and its
    export name."""

    def text(value: Any) -> str:
        return "x".join(text(v) for v in value) if isinstance(value, (list, tuple)) else str(value)

    return ",".join(f"{k}={text(v)}" for k, v in kwargs.items()) or "default"


def input_tree(inputs: list[Any]) -> tuple[SeqInput, list[torch.Tensor], list[Any]]:
    """The structure of a call's arguments, its tensor leaves (contiguous) and its other values."""
    tensors: list[torch.Tensor] = []
    args: list[Any] = []
    items = [_walk_input(x, tensors, args) for x in inputs]
    return {"k": "seq", "type": "list", "items": items}, tensors, args


# Module-level walks rather than nested recursive closures: a closure that calls itself is a
# reference cycle holding whatever it gathered (a call's inputs, the reference's outputs) until the
# cyclic collector runs, which counts Python objects, not bytes: the reference jail grew by a
# call's tensors with every reference until its memory cap killed it.
def _walk_input(node: Any, tensors: list[torch.Tensor], args: list[Any]) -> InputNode:
    if isinstance(node, torch.Tensor):
        tensors.append(node.detach().contiguous())
        return {"k": "tensor", "leaf": len(tensors) - 1}
    if isinstance(node, (list, tuple)):
        return {
            "k": "seq",
            "type": "tuple" if isinstance(node, tuple) else "list",
            "items": [_walk_input(x, tensors, args) for x in node],
        }
    if node is None or isinstance(node, (bool, int, float, str)):
        args.append(node)
        return {"k": "arg", "i": len(args) - 1}
    raise TypeError(
        f"get_inputs() returned a {type(node).__name__}; inputs must be tensors, numbers, "
        "strings, None, or lists/tuples of them"
    )


def output_tree(out: Any) -> tuple[OutputNode, list[torch.Tensor]]:
    """The structure of a forward's output (as ``compare.encode_reference`` encodes it, without
    values) and its tensor leaves, numbered in the order of ``leaf``."""
    tensors: list[torch.Tensor] = []
    return _walk_output(out, tensors), tensors


def _walk_output(node: Any, tensors: list[torch.Tensor]) -> OutputNode:
    if isinstance(node, torch.Tensor):
        tensors.append(node)
        return {
            "k": "tensor",
            "leaf": len(tensors) - 1,
            "dtype": dtype_name(node.dtype),
            "shape": list(node.shape),
            "device": str(node.device),
        }
    if isinstance(node, (list, tuple)):
        return {"k": "seq", "type": type(node).__name__, "items": [_walk_output(x, tensors) for x in node]}
    if node is None or isinstance(node, (bool, int, float)):
        return {"k": "scalar", "v": node}
    return {"k": "other", "type": type(node).__name__}


def without_leaves(tree: OutputNode) -> OutputNode:
    """An output tree as the reference's structure is kept: tensor nodes without their leaf number."""
    if tree.get("k") == "tensor":
        return {k: v for k, v in tree.items() if k != "leaf"}
    if tree.get("k") == "seq":
        return {**tree, "items": [without_leaves(x) for x in tree["items"]]}
    return tree
