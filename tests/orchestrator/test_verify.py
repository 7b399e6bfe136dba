"""``stark-mcp verify``: a run's kernel evaluated again from scratch against its recorded figures, as a
user runs it (a real subprocess, the real SQLite file, edited as someone with a shell could)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from stark_mcp.evaluator import Evaluator
from stark_mcp.evaluator.host.verdict_dependencies import evaluator_digest
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.orchestrator.verify import EXIT_DOES_NOT_HOLD, EXIT_HOLDS, read_evidence
from stark_mcp.records import Node, RunRecord
from stark_mcp.store import Store
from tests.evaluator.conftest import FAST, FIXTURES, fixture_text
from tests.toolchain import shared_toolchain

CLI = [sys.executable, "-m", "stark_mcp"]


def stark(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "STARK_"))}
    env["STARK_HOME"] = str(home)
    env["STARK_TOOLCHAIN_DIR"] = str(shared_toolchain())
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=300)


def honest_run(home: Path) -> tuple[RunRecord, Node]:
    """A run with one passing attempt, recorded as the server records it."""

    async def record() -> tuple[RunRecord, Node]:
        async with (
            Evaluator(home / "cache", FAST, toolchain_dir=shared_toolchain()) as ev,
            await Store.open(home / "stark.db") as store,
        ):
            service = RunService(store, ev)
            try:
                run, root = await service.create_run(
                    str(FIXTURES / "relu_sum.py"), device="cpu", eval_settings=FAST, budget=2
                )
                node = await service.add_child(run.id, root.id, fixture_text("torch_ok.py"))
            finally:
                await service.aclose()
        return run, node

    return asyncio.run(record())


def edit(db: Path, run_id: str, node_id: str, *paths_times_ten: str) -> None:
    """Multiply numbers inside a node's stored evaluation by ten, straight in the SQLite file."""
    with sqlite3.connect(db) as conn:
        for path in paths_times_ten:
            conn.execute(
                "UPDATE nodes SET evaluation_json = json_set(evaluation_json, ?, "
                "json_extract(evaluation_json, ?) * 10) WHERE run_id = ? AND id = ?",
                (path, path, run_id, node_id),
            )


@pytest.mark.slow  # three fresh evaluations in subprocesses
def test_verify_confirms_an_honest_run_and_flags_an_edited_row(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run, node = honest_run(home)
    assert node.evaluation is not None and node.evaluation.passed

    honest = stark(home, "verify", run.id)
    assert honest.returncode == EXIT_HOLDS, honest.stdout + honest.stderr
    assert f"verify run {run.id} node {node.id}" in honest.stdout
    assert "the recorded figures hold" in honest.stdout and "DOES NOT HOLD" not in honest.stdout
    assert not list(home.glob("verify-*"))  # its fresh cache is gone

    # export verifies the file it wrote, which carries its evidence; verify reads that back.
    kernel = tmp_path / "best_kernel.py"
    exported = stark(home, "export", run.id, "--out", str(kernel))
    assert exported.returncode == EXIT_HOLDS, exported.stdout + exported.stderr
    assert "the recorded figures hold" in exported.stderr
    evidence = read_evidence(kernel.read_text(), str(kernel))
    recorded = node.evaluation
    assert (evidence.run_id, evidence.node_id) == (run.id, node.id)
    assert evidence.device_name == recorded.device_name
    assert evidence.speedups == recorded.speedups and evidence.runtime == recorded.runtime
    assert evidence.dependencies is not None and evidence.dependencies.evaluator == evaluator_digest()
    assert evidence.dependencies.torch and evidence.isolation and evidence.recorded_at
    # The block edited by hand (a speedup ten times larger) no longer holds.
    text = kernel.read_text()
    speedup = f"'speedups': {{'eager': {recorded.speedups['eager']!r}}}"
    assert speedup in text
    kernel.write_text(text.replace(speedup, f"'speedups': {{'eager': {recorded.speedups['eager'] * 10!r}}}"))
    forged = stark(home, "verify", str(kernel))
    assert forged.returncode == EXIT_DOES_NOT_HOLD, forged.stdout + forged.stderr
    assert f"verify {kernel}" in forged.stdout and "does not follow from the recorded times" in forged.stdout

    # Someone with a shell makes the speedup ten times larger: it no longer follows from the times.
    edit(home / "stark.db", run.id, node.id, "$.speedups.eager")
    edited = stark(home, "verify", run.id)
    assert edited.returncode == EXIT_DOES_NOT_HOLD, edited.stdout + edited.stderr
    assert "does not follow from the recorded times" in edited.stdout
    assert "speedup vs eager" in edited.stdout and "DOES NOT HOLD" in edited.stdout

    # A careful edit keeps them consistent (the eager time ten times larger too): measuring again says.
    edit(home / "stark.db", run.id, node.id, "$.baselines.eager.median_ms")
    careful = stark(home, "verify", run.id, "--node", node.id)
    assert careful.returncode == EXIT_DOES_NOT_HOLD, careful.stdout + careful.stderr
    assert "does not follow" not in careful.stdout
    assert "speedup vs eager: recorded" in careful.stdout


def test_verify_names_what_it_cannot_verify(tmp_path: Path) -> None:
    home = tmp_path / "home"
    missing = stark(home, "verify", str(tmp_path / "nowhere.py"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    plain = tmp_path / "plain.py"
    plain.write_text(fixture_text("torch_ok.py"))
    bare = stark(home, "verify", str(plain))
    assert bare.returncode == 2 and "carries no STARK_EVIDENCE block" in bare.stderr
