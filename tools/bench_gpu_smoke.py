"""`stark-mcp bench` on a CUDA device, offline: one problem, two strategies, every compile baseline.

Runs the real CLI with scripted replies (a CUDA kernel that fails to build, the fused kernel that
passes, a plain-torch rewrite) on tests/fixtures/cuda/problem_relu_add.py, then checks that the
report holds each baseline the evaluator timed, with its mode, and prints report.md's tables.

usage: python tools/bench_gpu_smoke.py [--out DIR] [--baselines eager,compile_default,...]
Takes a few minutes (two nvcc builds and the torch.compile baselines). Exit status 0 when every
check holds. With $OUT set, the benchmark folder is written there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CUDA = ROOT / "tests" / "fixtures" / "cuda"
REPLIES = [  # generalist replies, in the order the pairs consume them
    CUDA / "cand_relu_add_compile_error.py",  # relu_add:sampling n1 -> build_error
    CUDA / "cand_relu_add_fused.py",  # relu_add:sampling n2 -> passed
    CUDA / "cand_relu_add_fused.py",  # relu_add:reflexion n1 -> passed (a cache hit)
    None,  # relu_add:reflexion n2 -> plain torch, passed
]
TORCH_REWRITE = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x, y):\n        return torch.relu_(x + y)\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ["OUT"]) / "bench" if "OUT" in os.environ else None
    )
    parser.add_argument("--baselines", default="eager,compile_default,compile_max_autotune")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "bench"
        problems = Path(tmp) / "problems"
        problems.mkdir()
        (problems / "relu_add.py").write_text((CUDA / "problem_relu_add.py").read_text())
        replies = Path(tmp) / "replies.jsonl"
        texts = [path.read_text() if path else TORCH_REWRITE for path in REPLIES]
        replies.write_text(
            "".join(json.dumps({"text": f"```python\n{t}```\n", "role": "generalist"}) + "\n" for t in texts)
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "STARK_"))}
        env["STARK_HOME"] = str(Path(tmp) / "home")
        command = [
            sys.executable,
            "-m",
            "stark_mcp",
            "bench",
            str(problems),
            "--strategies",
            "sampling,reflexion",
            "--budget",
            "2",
            "--device",
            "cuda",
            "--baselines",
            args.baselines,
            "--backend",
            f"scripted:{replies}",
            "--out",
            str(out),
        ]
        started = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3000, check=False)
        print(f"stark-mcp bench exited {done.returncode} after {time.monotonic() - started:.0f} s")
        if done.returncode != 0:
            print(done.stderr[-4000:])
            return 1
        report = json.loads((out / "report.json").read_text())
        wanted = args.baselines.split(",")
        sampling = report["levels"]["all"]["sampling"]
        checks = {
            "both pairs complete": report["pairs_complete"] == 2,
            "timed on a GPU": any(d != "cpu" for d in report["devices"]),
            "eager reported": "eager" in report["baselines"],
            "only the requested baselines reported": set(report["baselines"]) <= set(wanted),
            "sampling solved the problem": sampling["success_rate"] == 1.0,
            "the build error counted (compile rate 0.5)": sampling["compile_rate"] == 0.5,
        }
        for name, value in checks.items():
            print(f"{'ok ' if value else 'BAD'} {name}")
        # A mode that could not be timed is the evaluator's business, shown here for the record.
        print(f"devices: {report['devices']}")
        print(f"baselines and modes: {json.dumps(report['baselines'])}")
        print(f"requested but not timed: {sorted(set(wanted) - set(report['baselines'])) or 'none'}")
        print((out / "report.md").read_text())
        return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
