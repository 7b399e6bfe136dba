"""Shared pieces of the server tests: fixture sources, fast evaluator settings, plans, helpers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult

from stark_mcp.config import Settings
from stark_mcp.evaluator import EvalSettings
from stark_mcp.llm import ModelPrice, PriceTable
from stark_mcp.server import build_server
from stark_mcp.server.state import BackendFactory

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM = FIXTURES / "problem_relu_scale.py"
MODES = ("auto", "legacy")

# Scripted replies cost nothing; tests of cost accounting price the "scripted" model like a real one.
PRICED = PriceTable(models={"scripted": ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)})

# Small enough that one CPU evaluation is two short processes.
FAST = EvalSettings(
    baselines=("eager",), trials=2, min_calls=5, min_time_s=0.01, max_time_s=0.2, warmup_s=0.0, input_sets=1,
    load_timeout_s=60, correctness_timeout_s=60, timing_timeout_s=60, baseline_timeout_s=120,
)


def source(name: str) -> str:
    return (FIXTURES / f"{name}.py").read_text()


def make_server(
    home: Path, backend_factory: BackendFactory | None = None, roots: tuple[Path, ...] = (),
    problem_sources: bool = True, isolation: str = "auto",
) -> Any:
    """A server whose clients may name paths in the test's working folder (the repository: its
    fixtures) and in ``roots``; the tests pass problems as text too, unless ``problem_sources`` is
    False (the default of ``stark-mcp serve``: text only where the evaluator's ``isolation`` jails
    problem code)."""
    return build_server(Settings(home=home, isolation=isolation), eval_settings=FAST,  # type: ignore[arg-type]
                        backend_factory=backend_factory, roots=roots, problem_sources=problem_sources)


def anchored_plan(base: str, body_line: str = "return torch.relu(x) * self.scale") -> str:
    """A plan on ``base`` whose single span wraps the line holding ``body_line``."""
    lines = []
    for line in base.splitlines():
        if body_line in line:
            indent = line[: len(line) - len(line.lstrip())]
            lines += [f"{indent}# <<<IMPROVE BEGIN>>>", line, f"{indent}# <<<IMPROVE END>>>"]
        else:
            lines.append(line)
    scaffold = "\n".join(lines)
    advice = "Replace relu and the multiply with one clamp_min."
    return f"## Advice\n{advice}\n\n## Scaffold\n```python\n{scaffold}\n```\n"


def sleeper(marker: str) -> str:
    """A candidate whose forward renames its process to ``marker`` (visible from outside the sandbox,
    which lets it write nothing we can read) and then hangs."""
    return f'''import time

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with open("/proc/self/comm", "w") as handle:
            handle.write({marker[:15]!r})
        time.sleep(300)
        return x
'''


def processes_named(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as handle:
                    if handle.read().strip() == marker[:15]:
                        found.append(int(entry))
            except OSError:
                continue
    return found


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)


def tree_of(text: str) -> dict[str, Any]:
    return json.loads(text)


class ProgressLog:
    """Collects progress notifications and checks that they strictly increase."""

    def __init__(self) -> None:
        self.events: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.events.append((progress, total, message))

    def assert_increasing(self) -> None:
        values = [p for p, _, _ in self.events]
        assert values == sorted(values) and len(set(values)) == len(values), values

