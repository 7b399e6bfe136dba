"""Describing a forward's result and publishing its tensors into the shared output region.

Runs inside the runner. The description is what the worker validates (types, shapes, dtypes,
devices); the published bytes are what it compares with the trusted reference.

On the CPU, where the worker can read the runner's memory, a leaf is published by address instead
(``keep`` then holds what must stay alive until the next call): the worker copies the bytes of the
calls it checks itself, off the jail's clock. A copy here would be charged to every call's bracket,
and what it costs depends on what the forward left in the caches, which differs from one code to
another: an honest C++ kernel's share of the harness came out 0.1 to 0.26 ms above the reference's on
a loaded 2-core VM, which the trusted clock read as a shaved report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from stark_mcp.evaluator.common.regions import dtype_name
from stark_mcp.evaluator.common.runner_wire import Described, DescribedTensor

MAX_ITEMS = 64
MAX_DEPTH = 6


@dataclass(frozen=True)
class OutputForm:
    """What a leaf published by address must match: no tensor, so nothing a candidate finds by
    walking the collector's objects looks like an answer."""

    shape: list[int]
    dtype: torch.dtype


def describe_and_publish(
    obj: Any,
    expected: list[torch.Tensor] | list[OutputForm],
    inputs: list[Any],
    keep: list[torch.Tensor] | None = None,
    harness: HarnessSpans | None = None,
) -> tuple[Described, list[str]]:
    """The tree of ``obj`` with every plain tensor leaf copied into ``expected[i]`` (region views)
    when it fits, or, with ``keep``, a CPU leaf described by the address of its contiguous bytes
    (kept alive in ``keep``; ``expected`` then holds only forms). A leaf left unpublished is judged
    by its description (its device, shape or dtype is wrong).

    ``harness``: the address ranges of the shared regions. A leaf whose memory lies in them is
    flagged: in the input region it aliases an input, whatever tensor object it came as; in the
    output region it is the harness's own publish buffer, written by the forward so that the copy
    every baseline call pays is skipped (``copy_`` onto itself does nothing), which shrinks the
    trusted bracket below the work done."""
    # A plain object rather than a recursive closure: a closure that calls itself is a reference
    # cycle, and everything it holds (``keep``: each call's output) would live until the collector
    # ran, so every call's output took fresh pages (1,024 page faults, ~1.5 ms, for 4 MB).
    walker = _Walker(expected, _storages(inputs), keep, harness or HarnessSpans())
    return walker.walk(obj, 0), sorted(set(walker.flags))


@dataclass(frozen=True)
class HarnessSpans:
    """[start, end) byte addresses of the shared input and output regions in this process."""

    inputs: tuple[int, int] = (0, 0)
    outputs: tuple[int, int] = (0, 0)


def _overlaps(lo: int, hi: int, span: tuple[int, int]) -> bool:
    return lo < span[1] and span[0] < hi


class _Walker:
    def __init__(
        self,
        expected: list[torch.Tensor] | list[OutputForm],
        input_ptrs: set[int],
        keep: list[torch.Tensor] | None,
        harness: HarnessSpans,
    ) -> None:
        self.expected, self.input_ptrs, self.keep = expected, input_ptrs, keep
        self.harness = harness
        self.flags: list[str] = []
        self.count = 0

    def walk(self, node: Any, depth: int) -> Described:
        if type(node) is torch.Tensor:
            return self.tensor(node)
        if isinstance(node, torch.Tensor):
            # Never call methods on a subclass: its __torch_function__ is candidate code.
            return {"k": "subclass", "type": type(node).__name__[:80]}
        if type(node) in (tuple, list):
            if depth >= MAX_DEPTH or len(node) > MAX_ITEMS:
                return {"k": "other", "type": f"{type(node).__name__} too deep or too long"}
            items = [self.walk(x, depth + 1) for x in node]
            return {"k": "seq", "type": type(node).__name__, "items": items}
        if isinstance(node, (tuple, list)):
            return {
                "k": "other",
                "type": f"{type(node).__name__} (a {type(node).__mro__[1].__name__} subclass)",
            }
        if node is None or type(node) in (bool, int, float):
            return {"k": "scalar", "v": node}
        return {"k": "other", "type": type(node).__name__[:80]}

    def tensor(self, node: torch.Tensor) -> DescribedTensor:
        i = self.count
        self.count += 1
        t = node.detach()
        entry: DescribedTensor = {
            "k": "tensor",
            "dtype": dtype_name(t.dtype),
            "shape": list(t.shape),
            "device": str(t.device),
            "leaf": -1,
        }
        if t.numel():
            storage = t.untyped_storage()
            lo = storage.data_ptr()
            hi = lo + storage.nbytes()
            if lo in self.input_ptrs or _overlaps(lo, hi, self.harness.inputs):
                self.flags.append("output_aliases_input")
            if _overlaps(lo, hi, self.harness.outputs):
                self.flags.append("output_in_harness_region")
        expected = self.expected
        if i < len(expected) and list(expected[i].shape) == list(t.shape) and expected[i].dtype == t.dtype:
            if self.keep is None:
                expected[i].copy_(t)  # type: ignore[union-attr]  (region views on this path)
            elif t.device.type == "cpu":  # any other device has no bytes here to read
                t = t.contiguous()  # a copy only for a strided output
                self.keep.append(t)
                entry["addr"] = t.data_ptr()
            else:
                return entry
            entry["leaf"] = i
        return entry


def _storages(obj: Any) -> set[int]:
    if type(obj) is torch.Tensor:
        return {obj.untyped_storage().data_ptr()} if obj.numel() else set()
    if isinstance(obj, (list, tuple)):
        out: set[int] = set()
        for x in obj:
            out |= _storages(x)
        return out
    return set()
