"""One tiny benchmark, run as a user runs it and shared by the benchmark and report tests.

2 problems x 2 strategies x budget 2 on the CPU, scripted model, real evaluator (eager baseline
only). The first command's replies run out during the last pair, leaving it unstarted; the second
command, with that pair's replies only, must skip the three complete pairs and finish the last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .replies import (
    PROBLEMS,
    RELU_CRASH,
    RELU_FIXED,
    RELU_FUSED,
    RELU_WRONG,
    SIG_LOAD,
    SIG_OFF,
    SIG_PASS,
    SIG_PASS2,
    write_replies,
)

CLI = [sys.executable, "-m", "stark_mcp"]
FAST = {"trials": 2, "warmup_s": 0.0, "min_calls": 3, "min_time_s": 0.0, "max_time_s": 0.05, "input_sets": 1}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class BenchRun:
    home: Path
    out: Path
    first: subprocess.CompletedProcess[str]
    second: subprocess.CompletedProcess[str]

    @property
    def db(self) -> Path:
        return self.home / "stark.db"


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "STARK_"))}
    env["STARK_HOME"] = str(home)
    # Price the scripted model, so the cost columns are computed from real token counts.
    prices = home.parent / "prices.json"
    prices.write_text(json.dumps({"scripted": {"input": 3.0, "output": 15.0, "cache_read": 0.3,
                                               "cache_write": 3.75}}))
    env["STARK_PRICES"] = str(prices)
    env["COLUMNS"] = "200"  # one log line per event, unwrapped, in the captured stderr
    return env


def bench_command(out: Path, replies: Path, *extra: str) -> list[str]:
    return [
        *CLI,
        "bench",
        str(PROBLEMS),
        "--strategies",
        "sampling,reflexion",
        "--budget",
        "2",
        "--device",
        "cpu",
        "--baselines",
        "eager",
        "--eval-settings",
        json.dumps(FAST),
        "--backend",
        f"scripted:{replies}",
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture(scope="session")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    root = tmp_path_factory.mktemp("bench")
    home, out = root / "home", root / "out"
    first_replies = write_replies(
        root / "first.jsonl",
        [
            RELU_WRONG,
            RELU_FUSED,  # scaled_relu, sampling
            RELU_CRASH,
            RELU_FIXED,  # scaled_relu, reflexion: a crash, then its debug fix
            SIG_LOAD,
            SIG_OFF,  # sigmoid_scale, sampling: fails to load, then fails our contract only
        ],
    )
    second_replies = write_replies(root / "second.jsonl", [SIG_PASS, SIG_PASS2])  # sigmoid_scale, reflexion
    # The first command writes no report (the second does): it would only cost the tests time.
    first = subprocess.run(
        bench_command(out, first_replies, "--no-report"),
        env=cli_env(home),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=root,
    )
    second = subprocess.run(
        bench_command(out, second_replies),
        env=cli_env(home),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=root,
    )
    return BenchRun(home=home, out=out, first=first, second=second)
