"""tools/host_rounds.py on the CPU: a host's rounds through a real stdio server, the state carried
between invocations the way it travels between the GPU box and here (an archive, unpacked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .support import FAST, PROBLEM, anchored_plan, source

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "host_rounds.py"


def rounds(*args: str | Path) -> str:
    done = subprocess.run(
        [sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def device(state: Path, out: Path, *extra: str | Path) -> dict:
    out.mkdir(exist_ok=True)
    rounds("device", "--state", state, "--device", "cpu", "--budget", "3", "--budget-s", "240",
           "--min-attempt-s", "5", "--eval-settings", FAST.model_dump_json(), "--out", out, *extra)
    produced = sorted(path.name for path in out.iterdir())
    assert "state.tgz" in produced and len(produced) <= 8
    return json.loads(sorted(out.glob("round-*.json"))[-1].read_text())


@pytest.mark.slow  # starts servers and evaluations
def test_rounds_carry_the_state_from_device_to_here_and_back(tmp_path: Path) -> None:
    kernelbench = tmp_path / "problems.jsonl"
    kernelbench.write_text(json.dumps(
        {"level": 1, "problem_id": 7, "name": "relu_scale", "code": PROBLEM.read_text()}) + "\n")
    box, here = tmp_path / "box", tmp_path / "here"

    # Round 0 on the "device": the run is created and the root's plan prompt comes back.
    first = device(box / "state", tmp_path / "out0", "--problems", "L1/7", "--kernelbench", kernelbench)
    assert first["create_errors"] == {} and first["applied"] == []
    (step,) = first["next"]
    assert (step["problem"], step["node_id"], step["action"], step["role"]) == ("L1/7", "n0", "plan", "plan")
    assert "IMPROVE BEGIN" in step["prompt"]
    run_id = json.loads((box / "state" / "runs.json").read_text())["L1/7"]["run_id"]
    assert step["run_id"] == run_id

    # Here: unpack, read the prompt, write a plan, render the code prompt without the device.
    rounds("prompts", "--state", here, "--from", tmp_path / "out0" / "state.tgz")
    folder = here / "next" / "L1_7"
    assert (folder / "prompt.md").read_text() == step["prompt"]
    assert (folder / "plan.md").read_text() == "" and (folder / "source.py").read_text() == ""
    assert "not written yet: L1/7" in rounds("pack", "--state", here, "--out", tmp_path / "replies.jsonl")

    (folder / "plan.md").write_text("## Advice\nnot anchored at all\n")
    rounds("local", "--state", here)
    assert "IMPROVE" in (folder / "code_prompt.error.txt").read_text()
    plan = anchored_plan(PROBLEM.read_text())
    (folder / "plan.md").write_text(plan)
    rounds("prompts", "--state", here)  # again, by mistake: the replies written stay
    assert (folder / "plan.md").read_text() == plan
    rounds("local", "--state", here)
    code_prompt = (folder / "code_prompt.md").read_text()
    assert "Replace relu and the multiply with one clamp_min." in code_prompt
    assert not (folder / "code_prompt.error.txt").exists()
    (folder / "source.py").write_text(source("cand_clamp"))
    assert "1 replies" in rounds("pack", "--state", here, "--out", tmp_path / "replies.jsonl")

    # Round 1 on the carried state: the reply is evaluated and recorded, the next prompt comes back.
    second = device(here, tmp_path / "out1", "--replies", tmp_path / "replies.jsonl")
    (outcome,) = second["applied"]
    assert outcome["applied"] and outcome["status"] == "passed" and outcome["parent_id"] == "n0"
    assert outcome["speedups"]["eager"] > 0 and outcome["attempts_left"] == 2
    (after,) = second["next"]
    assert after["run_id"] == run_id and after["attempts_left"] == 2 and after["prompt"]
    assert (here / "rounds" / "round-1" / "L1_7" / f"result-{outcome['reply_id']}.md").exists()

    # The same replies again are recognised and not recorded twice.
    third = device(here, tmp_path / "out2", "--replies", tmp_path / "replies.jsonl")
    assert third["applied"] == [] and third["skipped_replies"] == [outcome["reply_id"]]
    assert third["next"][0]["attempts_left"] == 2

    # The carried database feeds the table: the run knows its level and id, and holds its attempt.
    table = tmp_path / "table"
    done = subprocess.run(
        [sys.executable, "-m", "stark_mcp", "report", "--runs", run_id, "--out", str(table)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "STARK_HOME": str(here / "home")},
    )
    assert done.returncode == 0, done.stderr
    (line,) = json.loads((table / "report.json").read_text())["problems"]
    assert (line["key"], line["solved"], line["attempts"]) == ("1/7", True, 1)
    # ... and every attempt's verdict, read from it
    rows = rounds("table", "--state", here).splitlines()
    assert rows[0].startswith("| problem | run | node |") and len(rows) == 3
    assert rows[2].startswith(f"| L1/7 | `{run_id}` | n1 | n0 | plan | passed |")


def test_bad_problem_names_are_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), "device", "--state", str(tmp_path / "s"), "--problems", "59",
         "--kernelbench", str(tmp_path / "none.jsonl"), "--device", "cpu"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1
    assert "L<level>/<id>" in json.loads((tmp_path / "s" / "round-0.json").read_text())["error"]
