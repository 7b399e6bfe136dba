"""The README's first command must work as written: it is the first thing a newcomer runs."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.toolchain import headers_made_with

ROOT = Path(__file__).resolve().parents[1]


def readme_main_command() -> list[str]:
    """The ``stark-mcp ...`` part of the README's first set-up line (after the install)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    first_line = block.strip().splitlines()[0]
    install, _, command = first_line.partition(" && ")
    assert install.startswith("pip install") and command.startswith("stark-mcp "), first_line
    return shlex.split(command)


# The suite's longest test, handed out first (tests/conftest.py), on one worker with the other test that
# builds with the demo's flags: one makes their precompiled header while the other waits for nothing.
@pytest.mark.slow(seconds=95)
@pytest.mark.xdist_group("demo_header")
def test_readme_main_command_runs_the_offline_search(tmp_path: Path) -> None:
    argv = readme_main_command()
    out = tmp_path / "out"
    env = {**os.environ, "STARK_HOME": str(tmp_path / "home")}
    env.pop("STARK_LLM", None)
    done = subprocess.run(
        [sys.executable, "-m", "stark_mcp", *argv[1:], "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["attempts"] == 2 and summary["best_node_id"] == "n2"
    assert summary["usage"]["calls"] > 0 and summary["usage"]["cost_usd"] == 0  # scripted: no model was paid
    # The scripted story: the planned kernel fails to build, the debug fix passes.
    show = subprocess.run([sys.executable, "-m", "stark_mcp", "show", summary["run_id"]], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert show.returncode == 0, show.stderr
    assert "build_error" in show.stdout and "debug" in show.stdout
    # The export builds its kernel with torch's own load_inline, as on a user's machine; the run's
    # precompiled header for the demo's flags, on CPATH, saves that compile about 35 CPU-s here.
    headers = headers_made_with("-O3", "-fno-trapping-math")
    assert headers, "the demo's build made no precompiled header for its flags"
    exported = subprocess.run([sys.executable, str(out / "best_kernel.py")], cwd=tmp_path,
                              env={**env, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"),
                                   "CPATH": os.pathsep.join(headers)},
                              capture_output=True, text=True, timeout=300)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "relative error vs reference" in exported.stdout and "FAILED" not in exported.stdout
    # The same kernel made wrong (its outputs half again too large) must fail loudly, not exit 0.
    marker = "# ---- self-check added by `stark-mcp export`"
    text = (out / "best_kernel.py").read_text()
    assert marker in text
    wrong = tmp_path / "wrong_kernel.py"
    made_wrong_by = "_right = ModelNew.forward\nModelNew.forward = lambda self, *a: _right(self, *a) * 1.5\n"
    wrong.write_text(text.replace(marker, made_wrong_by + marker))
    made_wrong = subprocess.run([sys.executable, str(wrong)], cwd=tmp_path,
                                env={**env, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"),
                                     "CPATH": os.pathsep.join(headers)},
                                capture_output=True, text=True, timeout=300)
    assert made_wrong.returncode == 1, made_wrong.stdout + made_wrong.stderr[-3000:]
    assert "FAILED" in made_wrong.stdout
