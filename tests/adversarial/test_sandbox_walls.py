"""Issue 10's walls, checked from outside: an attacker given the real host paths and a live port writes
nothing outside its scratch space, reaches no network and leaves no process, at each isolation level
this machine allows (weaker levels forced through the isolation setting). Each test id names the level
it ran."""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import threading
from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.evaluator.sandbox import levels
from stark_mcp.evaluator.sandbox.levels import SandboxPolicy
from stark_mcp.problems import load_problem, source_hash
from stark_mcp.records import Status
from tests.adversarial import cases

SETTINGS = EvalSettings(
    baselines=("eager",), trials=2, min_calls=10, min_time_s=0.002, max_time_s=0.1, load_timeout_s=90.0
)
pytestmark = pytest.mark.anyio

ATTACK = """
# Mentions load_inline, so the evaluator runs a builder on it and then writes into its build folder.
import glob, os, socket, sqlite3
import torch
import torch.nn as nn

TARGETS = TARGET_PATHS
PORT = PORT_NUMBER
LINKS = LINK_PAIRS


def plant_links():
    # Where the evaluator writes after the build (its index, the libraries): links to host paths.
    build = os.environ.get("TORCH_EXTENSIONS_DIR", "")
    for name, target in LINKS:
        try:
            os.symlink(target, os.path.join(build, name))
        except OSError:
            pass


plant_links()  # at import: the builder imports the module, it never constructs ModelNew


def attempts():
    done = []
    for path in TARGETS:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a") as fh:
                fh.write("pwned")
            done.append(path)
        except OSError:
            pass
    for pattern in ("/tmp/stark-worker-*/problem-*/problem.py", "/tmp/stark-*/**/*.py"):
        for path in glob.glob(pattern, recursive=True):
            try:
                with open(path, "a") as fh:
                    fh.write("# pwned")
                done.append(path)
            except OSError:
                pass
    try:
        con = sqlite3.connect(DB_PATH, timeout=0.2)
        con.execute("create table if not exists pwned (x)")
        con.commit()
        done.append("db")
    except Exception:
        pass
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=0.5).sendall(b"pwned")
        done.append("socket")
    except OSError:
        pass
    return done


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.done = attempts()
        print("ATTEMPTS SUCCEEDED:", self.done, flush=True)

    def forward(self, a, b):
        return torch.relu(a * self.scale + b)
"""


def available_levels() -> list[str]:
    return list(levels.detect(refresh=True).possible)


class Listener:
    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.port = self.server.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("level", available_levels())
async def test_an_attacker_changes_nothing_outside_its_scratch(level, tmp_path, monkeypatch) -> None:
    home, stark_home = tmp_path / "home", tmp_path / "stark"
    cache = stark_home / "cache"
    home.mkdir()
    cache.mkdir(parents=True)
    for path in (tmp_path, home, stark_home):
        os.chmod(path, 0o700)
    monkeypatch.setenv("HOME", str(home))
    db = stark_home / "stark.db"
    sqlite3.connect(db).execute("create table runs (id)").connection.commit()
    (home / "secret.txt").write_text("api key")
    listener = Listener()
    problem = load_problem(str(cases.HERE / "problems" / "scaled_add.py"))
    honest = (cases.HERE / "cpu" / "honest_fused_add.py").read_text()
    try:
        async with Evaluator(cache, SETTINGS, hidden=[stark_home, home], policy=SandboxPolicy(level)) as ev:
            first = await ev.evaluate(problem, honest, device="cpu")  # fills the caches an attacker wants
            assert first.status is Status.PASSED, first.message
            before = {**snapshot(cache), **snapshot(home), **snapshot(stark_home)}
            targets = [
                str(cache / "baselines" / "forged.json"),
                str(cache / "results" / problem.hash / "x.json"),
                str(home / ".bashrc"),
                str(home / "secret.txt"),
                str(db) + "-journal",
                str(cache / "builds" / "other" / "x.so"),
                str(Path.home() / "pwned.txt"),
            ]
            source = (
                ATTACK.replace("TARGET_PATHS", repr(targets))
                .replace("PORT_NUMBER", str(listener.port))
                .replace("DB_PATH", repr(str(db)))
                .replace("LINK_PAIRS", repr([("extensions.json", f"{home}/index.json"), ("ext", str(home))]))
            )
            attacked = await ev.evaluate(problem, source, device="cpu", use_cache=False)
            after_first = {**snapshot(cache), **snapshot(home), **snapshot(stark_home)}
            again = await ev.evaluate(problem, honest, device="cpu")
    finally:
        listener.server.close()
    assert attacked.status is Status.PASSED, attacked.message
    assert attacked.trust is not None and attacked.trust.isolation == level
    changed = {p for p in set(before) | set(after_first) if before.get(p) != after_first.get(p)}
    # The parent itself writes the attacked evaluation's signed result and its build's entry into the
    # cache: those are expected (nothing the attacker wrote is in them).
    own = (str(cache / "results"), str(cache / "builds" / source_hash(source)))
    changed = {
        p for p in changed if not p.startswith(own) or "pwned" in Path(p).read_text(errors="replace")
    }
    if level == "process":
        # Same user, no walls: writes may land, but nothing the attacker wrote is ever reused.
        assert again.status is Status.PASSED and not again.cached
        return
    assert not changed, f"the attacker changed {sorted(changed)} at level {level}"
    assert not any("pwned" in text for text in map(str, before.values()))
    assert "pwned" not in db.read_bytes().decode(errors="replace")
    assert not (Path.home() / "pwned.txt").exists()
    assert not (home / "index.json").exists()  # written through the link planted in the build folder
    if level == "sandbox":
        assert listener.connections == 0
    assert again.status is Status.PASSED and again.cached  # the honest result came back from the signed cache
