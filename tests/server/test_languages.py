"""Kernel languages through the in-process MCP client: a run's language is checked against its
device, stored and shown, and a source in another language is recorded as a clear rejection."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from .support import PROBLEM, error_text, make_server, ok

pytestmark = pytest.mark.anyio

TRITON_ONLY = """import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def scaled_relu_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        scaled_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), self.scale, BLOCK=1024)
        return out
"""


async def test_language_is_checked_stored_shown_and_enforced(tmp_path: Path) -> None:
    async with Client(make_server(tmp_path / "home")) as client:
        spec = {"problem": str(PROBLEM), "device": "cpu"}
        refused = await client.call_tool("create_run", {**spec, "language": "triton"})
        assert "language 'triton' does not run on the cpu device" in error_text(refused)
        assert "NVIDIA GPU" in error_text(refused)
        unknown = await client.call_tool("create_run", {**spec, "language": "rust"})
        assert "unknown language 'rust'" in error_text(unknown)
        assert ok(await client.call_tool("list_runs"))["runs"] == []  # nothing recorded, nothing timed

        created = ok(await client.call_tool("create_run", {**spec, "budget": 2}))
        assert created["language"] == "cpp" and created["pending_baselines"] == []
        run_id = created["run_id"]
        child = ok(
            await client.call_tool(
                "add_child",
                {
                    "run_id": run_id,
                    "parent_id": "n0",
                    "source": TRITON_ONLY,
                    "action": "plan",
                },
            )
        )
        assert child["status"] == "rejected" and child["reason"] == "language"
        assert "written in C++" in child["message"] and "Triton" in child["message"]
        assert child["attempts_left"] == 1  # recorded: the debug agent can repair it
        context = ok(
            await client.call_tool(
                "build_context",
                {
                    "run_id": run_id,
                    "node_id": child["node_id"],
                    "role": "debug",
                },
            )
        )["prompt"]
        assert "Write the kernels in C++" in context and "this run's kernels are written in C++" in context
