"""Shared regions are given back when their driver closes: a closed region refuses new views, and
closing twice, or while a view still exists, is harmless. The GPU side (memory the CUDA driver made,
which nothing else frees) is checked in tests/gpu/test_gpu_memory.py."""

from __future__ import annotations

import os

import pytest
import torch

from stark_mcp.evaluator.common.regions import Region, layout_for


def test_a_closed_host_region_refuses_views_and_closes_once() -> None:
    leaves, end = layout_for([([4, 4], torch.float32)])
    region, fd = Region.create(end, "cpu")
    try:
        region.view(leaves[0]).fill_(3.0)
        assert float(region.view(leaves[0]).sum()) == 48.0
        region.close()
        with pytest.raises(ValueError, match="closed"):
            region.view(leaves[0])
        with pytest.raises(ValueError):
            region.host_bytes(leaves[0])
        region.close()  # idempotent
    finally:
        os.close(fd)


def test_closing_while_a_view_lives_leaves_the_view_usable() -> None:
    """A host view still exporting the mapping keeps it (the collector unmaps it with the view)."""
    leaves, end = layout_for([([8], torch.int64)])
    region, fd = Region.create(end, "cpu")
    try:
        view = region.view(leaves[0])
        view.copy_(torch.arange(8))
        region.close()
        assert view.tolist() == list(range(8))
    finally:
        os.close(fd)
