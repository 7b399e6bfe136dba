"""Grow a real search tree on the CPU, open its report.html in headless chromium, click the best node,
check that its source is shown, and save a screenshot (docs/report_tree.png).

The tree is real: every attempt is built, checked and timed by the evaluator and recorded in a
SQLite store; only the model is scripted (plans anchored on whatever node the search picks, and a
rotating set of plain-torch candidates, some wrong or crashing, so the debug agent has work).

usage: python tools/report_screenshot.py [--budget 16] [--seed 7] [--out docs/report_tree.png] [--keep DIR]
Needs Debian's chromium (apt-get install chromium) and playwright (pip install -e '.[test]').
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
import time
from itertools import count
from pathlib import Path

from stark_mcp.config import Settings
from stark_mcp.evaluator import EvalSettings
from stark_mcp.llm import LLMRequest, ScriptedBackend
from stark_mcp.orchestrator.loop import run_search
from stark_mcp.orchestrator.session import open_service
from stark_mcp.problems import load_problem
from stark_mcp.report.writer import write_run_report
from stark_mcp.tree.anchors import BEGIN_MARK, END_MARK

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "tests" / "orchestrator" / "fixtures" / "scaled_relu.py"
FAST = EvalSettings(
    baselines=("eager",), trials=2, warmup_s=0.0, min_calls=5, min_time_s=0.0, max_time_s=0.1, input_sets=1
)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]

HEAD = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
INIT = (
    "    def __init__(self, scale: float) -> None:\n        super().__init__()\n        self.scale = scale\n"
    "{extra}\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        {body}\n"
)
# What the scripted coder writes, in turn: mostly correct rewrites, a wrong one and a crashing one.
BODIES = [
    "return torch.relu(x).mul_(self.scale).add_(1.0)",
    "return torch.relu(x) * self.scale + self.offset",  # crashes: no such attribute (debugged below)
    "return torch.clamp_min(x, 0.0) * self.scale + 1.0",
    "return torch.relu(x) * self.scale",  # wrong: forgets the shift
    "return torch.where(x > 0, x * self.scale, torch.zeros_like(x)) + 1.0",
    "return x.clamp(min=0).mul(self.scale).add(1.0)",
    "return (x.abs() + x).mul_(0.5 * self.scale).add_(1.0)",
    "return torch.addcmul(torch.ones_like(x), torch.relu(x), torch.full_like(x, self.scale))",
]


FIX = "        self.offset = 1.0\n"  # the debug agent's repair of the crashing body


def candidate(body: str, n: int, extra: str = "") -> str:
    return HEAD + INIT.format(extra=extra, body=body) + f"\n\n# scripted attempt {n}\n"


def latest_source(request: LLMRequest) -> str:
    """The latest attempt's source as the prompt shows it: the reference, or its first python block."""
    latest = request.body.split("## History", 1)[0]
    if "(the reference architecture)" in latest:
        return PROBLEM.read_text()
    match = re.search(r"```python\n(.*?)\n```", latest, re.DOTALL)
    assert match is not None, "no source in the prompt's latest attempt"
    return match.group(1) + "\n"


def scaffold(source: str) -> str:
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if "def forward" in line) + 1
    end = start
    while end < len(lines) and lines[end].startswith("        "):
        end += 1
    marked = (
        lines[:start]
        + [f"        # {BEGIN_MARK}"]
        + lines[start:end]
        + [f"        # {END_MARK}"]
        + lines[end:]
    )
    return "\n".join(marked)


def scripted_backend() -> ScriptedBackend:
    turns = count()

    def plan(request: LLMRequest) -> str:
        return (
            f"## Advice\nRewrite forward as one fused expression.\n\n## Scaffold\n```python\n"
            f"{scaffold(latest_source(request))}\n```\n"
        )

    def code(request: LLMRequest) -> str:
        n = next(turns)
        return f"```python\n{candidate(BODIES[n % len(BODIES)], n)}```\n"

    def debug(request: LLMRequest) -> str:
        fixed = candidate(BODIES[1], next(turns), extra=FIX)
        return f"```python\n{fixed}```\n"

    backend = ScriptedBackend()
    for _ in range(200):
        backend.enqueue(plan, role="plan")
        backend.enqueue(code, role="code")
        backend.enqueue(debug, role="debug")
    return backend


async def grow(home: Path, budget: int, seed: int, out: Path) -> str:
    settings = Settings(home=home)
    async with open_service(settings, FAST) as service:
        run, _ = await service.create_run(
            load_problem(str(PROBLEM)),
            device="cpu",
            budget=budget,
            seed=seed,
            strategy="stark",
            eval_settings=FAST,
        )
        await run_search(service, run.id, scripted_backend())
        await write_run_report(service, run.id, out)
        best = await service.best(run.id)
        assert best is not None, "no correct node: change --seed"
        return best.id


def screenshot(html: Path, node_id: str, png: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("needs Debian's chromium: apt-get install chromium")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=FLAGS)
        page = browser.new_page(viewport={"width": 1500, "height": 900})
        page.goto(html.as_uri())
        page.click(f'#tree .node[data-node="{node_id}"] circle')
        page.wait_for_selector("#source")
        shown = page.text_content("#source") or ""
        assert "class ModelNew" in shown, "the clicked node's source is not shown"
        page.screenshot(path=str(png))
        browser.close()
    print(f"clicked {node_id}; its source is shown; screenshot: {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report_tree.png")
    parser.add_argument("--keep", type=Path, help="keep the run's report folder here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp) / "report"
        started = time.monotonic()
        best = asyncio.run(grow(Path(tmp) / "home", args.budget, args.seed, folder))
        print(f"grew {args.budget} attempts in {time.monotonic() - started:.0f} s; best {best}")
        screenshot(folder / "report.html", best, args.out)


if __name__ == "__main__":
    main()
