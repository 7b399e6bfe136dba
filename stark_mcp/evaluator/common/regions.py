"""Shared tensor memory: one region per role (inputs, outputs), carved into tensors by a layout.

The trusted worker creates a region (host memory from ``memfd_create``, or GPU memory through
``cudadrv``) and hands its file descriptor to the runner, which maps the same memory. A layout is a
list of ``Leaf`` records, plain JSON that travels in the setup frame and the reference jail's answers.
Standard library and torch only.
"""

from __future__ import annotations

import mmap
from typing import Any, TypedDict

import torch

from stark_mcp.evaluator.common.control import shared_memory

ALIGN = 256


class Leaf(TypedDict):
    """One tensor's place in a region (a dict: it travels as JSON to runners and from the jail)."""

    offset: int  # bytes from the region's start, a multiple of ALIGN
    nbytes: int
    dtype: str  # ``dtype_name``
    shape: list[int]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_of(name: str) -> torch.dtype:
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


def nbytes_of(shape: list[int], dtype: torch.dtype) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n * torch.empty((), dtype=dtype).element_size()


def layout_for(
    specs: list[tuple[list[int], torch.dtype]], start: int = 0
) -> tuple[list[Leaf], int]:
    """Leaves packed from ``start`` with ALIGN-byte alignment; returns (leaves, end offset)."""
    leaves: list[Leaf] = []
    offset = start
    for shape, dtype in specs:
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        size = nbytes_of(shape, dtype)
        leaves.append({"offset": offset, "nbytes": size, "dtype": dtype_name(dtype), "shape": list(shape)})
        offset += size
    return leaves, offset


def layout_groups(
    groups: list[list[tuple[list[int], torch.dtype]]], start: int = 0
) -> tuple[list[list[Leaf]], int]:
    """Several groups of tensors (calls' inputs, slots) packed one after another from ``start``:
    each group's leaves, and the end offset. Both sides of a region compute its layout with this."""
    packed: list[list[Leaf]] = []
    end = start
    for specs in groups:
        leaves, end = layout_for(specs, end)
        packed.append(leaves)
    return packed, end


class Region:
    """A shared allocation: ``.flat`` is a uint8 tensor over all of it, on the CPU or a GPU."""

    def __init__(self, flat: torch.Tensor, size: int, keep: Any) -> None:
        self.flat, self.size, self._keep = flat, size, keep

    @classmethod
    def create(cls, nbytes: int, device: str) -> tuple[Region, int]:
        nbytes = max(nbytes, ALIGN)
        if device == "cpu":
            fd = shared_memory("stark-region", nbytes)
            mm = mmap.mmap(fd, nbytes)
            return cls(torch.frombuffer(mm, dtype=torch.uint8), nbytes, mm), fd
        from stark_mcp.evaluator.common.cudadrv import DeviceMapping

        mapping, fd = DeviceMapping.create(nbytes, _index(device))
        return cls(mapping.tensor, mapping.size, mapping), fd

    @classmethod
    def private(cls, nbytes: int) -> Region:
        """Host memory of this process alone (an anonymous private mapping), laid out like a shared
        region: where the worker reads a runner's outputs to, out of every runner's sight."""
        nbytes = max(nbytes, ALIGN)
        mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        return cls(torch.frombuffer(mm, dtype=torch.uint8), nbytes, mm)

    @classmethod
    def attach(cls, fd: int, nbytes: int, device: str) -> Region:
        if device == "cpu":
            mm = mmap.mmap(fd, nbytes)
            return cls(torch.frombuffer(mm, dtype=torch.uint8), nbytes, mm)
        from stark_mcp.evaluator.common.cudadrv import DeviceMapping

        mapping = DeviceMapping.import_fd(fd, nbytes, _index(device))
        return cls(mapping.tensor, mapping.size, mapping)

    def close(self) -> None:
        """Let go of the memory; idempotent. It is given back as soon as no view of it is left.

        A GPU region is memory the CUDA driver made (``cudadrv``), which torch's allocator never
        sees: a worker that only dropped its driver kept every runner's regions alive, 12 GB an
        evaluation of a 6 GB problem, until a candidate ran out of memory. A host region's mapping
        is kept alive by its views' buffer references and unmapped with the last of them; unmapping
        it under a live view would crash the process on its next read."""
        keep, self._keep = self._keep, None
        self.flat = None  # type: ignore[assignment]
        if keep is not None and not isinstance(keep, mmap.mmap):
            keep.close()

    def view(self, leaf: Leaf) -> torch.Tensor:
        if self._keep is None:
            raise ValueError("the region is closed")
        offset, size = int(leaf["offset"]), int(leaf["nbytes"])
        if offset < 0 or offset + size > self.size or offset % ALIGN:
            raise ValueError(f"leaf {leaf} does not fit the region of {self.size} bytes")
        dtype = dtype_of(str(leaf["dtype"]))
        shape = [int(d) for d in leaf["shape"]]
        raw = self.flat[offset : offset + size]
        if size == 0:
            return torch.empty(shape, dtype=dtype, device=self.flat.device)
        return raw.view(dtype).view(shape)

    def host_bytes(self, leaf: Leaf) -> memoryview:
        """The writable bytes of a leaf of a host region (what a read from a runner fills)."""
        if not isinstance(self._keep, mmap.mmap):
            raise ValueError("only an open host region has host bytes")
        self.view(leaf)  # the same bounds check
        offset = int(leaf["offset"])
        return memoryview(self._keep)[offset : offset + int(leaf["nbytes"])]


def _index(device: str) -> int:
    return int(device.split(":", 1)[1]) if ":" in device else 0
