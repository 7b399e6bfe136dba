"""Candidate sources and scripted agent replies for the loop's tests (plain torch: no builds).

Every source here is distinct, so each is evaluated once per test session and then served
from the evaluator's result cache, which the tests share.
"""

from __future__ import annotations

import json
from pathlib import Path

from stark_mcp.llm import ModelPrice, PriceTable
from stark_mcp.tree.anchors import BEGIN_MARK, END_MARK

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM_PATH = FIXTURES / "scaled_relu.py"
PROBLEM = PROBLEM_PATH.read_text()

# Scripted replies cost nothing; tests of cost accounting price the "scripted" model like a real one.
PRICED = PriceTable(models={"scripted": ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)})

_HEAD = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
'''


def candidate(body: str, init_extra: str = "") -> str:
    """A ModelNew whose forward is ``body`` (indented lines)."""
    return _HEAD + init_extra + "\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n" + body


# Passes: relu, scale and shift in place on relu's fresh output.
FUSED = candidate("        return torch.relu(x).mul_(self.scale).add_(1.0)\n")
# Passes: the same maths through clamp.
CLAMPED = candidate("        return torch.clamp_min(x, 0.0) * self.scale + 1.0\n")
# Passes: the same maths as one addcmul-free expression, written differently again.
WHERE = candidate("        return torch.where(x > 0, x * self.scale, torch.zeros_like(x)) + 1.0\n")
# wrong_output: forgets the shift.
WRONG = candidate("        return torch.relu(x) * self.scale\n")
# runtime_error: uses an attribute it never set.
CRASH = candidate("        return torch.relu(x) * self.scale + self.offset\n")
# The debug agent's repair of CRASH: sets the attribute.
FIXED = candidate("        return torch.relu(x) * self.scale + self.offset\n", "        self.offset = 1.0\n")


def scaffold(source: str) -> str:
    """``source`` with the body of ``forward`` between span markers (Python comments)."""
    lines = source.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if "def forward" in line) + 1
    end = start
    while end < len(lines) and (lines[end].startswith("        ") or not lines[end].strip()):
        end += 1
    while not lines[end - 1].strip():
        end -= 1
    return "".join(
        lines[:start] + [f"        # {BEGIN_MARK}\n"] + lines[start:end] + [f"        # {END_MARK}\n"]
        + lines[end:]
    )


def plan_reply(base: str, advice: str = "Fuse relu, scale and shift into one pass over the data.") -> str:
    return f"## Advice\n{advice}\n\n## Scaffold\n```python\n{scaffold(base)}```\n"


def code_reply(source: str) -> str:
    return f"Here is the kernel.\n\n```python\n{source}```\n"


def write_replies(path: Path, entries: list[tuple[str | None, str]]) -> Path:
    """A scripted-backend file (JSON list of {text, role})."""
    path.write_text(json.dumps([{"text": text, "role": role} for role, text in entries]))
    return path
