"""Describing a forward's result and publishing its tensors into the shared output region.

Runs inside the runner. The description is what the worker validates (types, shapes, dtypes,
devices); the published bytes are what it compares with the trusted reference.
"""

from __future__ import annotations

from typing import Any

import torch

from stark_mcp.evaluator.common.regions import dtype_name

MAX_ITEMS = 64
MAX_DEPTH = 6


def describe_and_publish(
    obj: Any, expected: list[torch.Tensor], inputs: list[Any]
) -> tuple[dict[str, Any], list[str]]:
    """The tree of ``obj`` with every plain tensor leaf copied into ``expected[i]`` when it fits."""
    flags: list[str] = []
    counter = [0]
    input_ptrs = _storages(inputs)

    def walk(node: Any, depth: int) -> dict[str, Any]:
        if type(node) is torch.Tensor:
            i = counter[0]
            counter[0] += 1
            t = node.detach()
            entry: dict[str, Any] = {
                "k": "tensor",
                "dtype": dtype_name(t.dtype),
                "shape": list(t.shape),
                "device": str(t.device),
                "leaf": -1,
            }
            if t.numel() and t.untyped_storage().data_ptr() in input_ptrs:
                flags.append("output_aliases_input")
            if (
                i < len(expected)
                and list(expected[i].shape) == list(t.shape)
                and expected[i].dtype == t.dtype
            ):
                expected[i].copy_(t)
                entry["leaf"] = i
            return entry
        if isinstance(node, torch.Tensor):
            # Never call methods on a subclass: its __torch_function__ is candidate code.
            return {"k": "subclass", "type": type(node).__name__[:80]}
        if type(node) in (tuple, list):
            if depth >= MAX_DEPTH or len(node) > MAX_ITEMS:
                return {"k": "other", "type": f"{type(node).__name__} too deep or too long"}
            return {"k": "seq", "type": type(node).__name__, "items": [walk(x, depth + 1) for x in node]}
        if isinstance(node, (tuple, list)):
            return {
                "k": "other",
                "type": f"{type(node).__name__} (a {type(node).__mro__[1].__name__} subclass)",
            }
        if node is None or type(node) in (bool, int, float):
            return {"k": "scalar", "v": node}
        return {"k": "other", "type": type(node).__name__[:80]}

    return walk(obj, 0), sorted(set(flags))


def _storages(obj: Any) -> set[int]:
    if type(obj) is torch.Tensor:
        return {obj.untyped_storage().data_ptr()} if obj.numel() else set()
    if isinstance(obj, (list, tuple)):
        out: set[int] = set()
        for x in obj:
            out |= _storages(x)
        return out
    return set()
