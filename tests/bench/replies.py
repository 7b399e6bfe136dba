"""Candidates and scripted replies for the benchmark's tests (plain torch: nothing to compile)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEMS = FIXTURES / "problems"


def _module(init: str, forward: str) -> str:
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        f"    def __init__(self, {init}: float) -> None:\n"
        f"        super().__init__()\n        self.{init} = {init}\n\n"
        f"    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        {forward}\n"
    )


# scaled_relu: relu(x) * scale + 1
RELU_WRONG = _module("scale", "return torch.relu(x) * self.scale")  # forgets the shift: wrong_output
RELU_FUSED = _module("scale", "return torch.relu(x).mul_(self.scale).add_(1.0)")  # passed
RELU_CRASH = _module("scale", "return torch.relu(x) * self.scale + self.offset")  # runtime_error
RELU_FIXED = _module("scale", "return torch.clamp_min(x, 0.0) * self.scale + 1.0")  # passed (the debug fix)
# sigmoid_scale: sigmoid(x) * alpha
SIG_LOAD = "import not_a_module_anywhere\n" + _module(
    "alpha", "return torch.sigmoid(x) * self.alpha"
)  # load_error
# Off by 2e-3 everywhere: outside our precision contract, inside KernelBench's allclose(1e-2).
SIG_OFF = _module("alpha", "return torch.sigmoid(x) * self.alpha + 2e-3")
SIG_PASS = _module("alpha", "return torch.sigmoid(x).mul_(self.alpha)")
SIG_PASS2 = _module("alpha", "return torch.special.expit(x) * self.alpha")


def code_reply(source: str) -> str:
    return f"Here is the kernel.\n\n```python\n{source}```\n"


def write_replies(path: Path, sources: list[str]) -> Path:
    """A scripted-backend file: one generalist reply per source, consumed in order."""
    path.write_text(
        "\n".join(json.dumps({"text": code_reply(s), "role": "generalist"}) for s in sources) + "\n"
    )
    return path
