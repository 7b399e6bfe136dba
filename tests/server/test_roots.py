"""Every path a client names over MCP stays inside the server's roots (its working folder and each
``--root``): absolute paths, ``..`` and symlinks that lead out are refused before anything is read or
written, over the in-process client and over ``serve --http``; a file that is no problem is never
quoted back."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from stark_mcp.orchestrator.roots import AllowedRoots, PathOutsideRoots, write_confined

from .support import PROBLEM, error_text, make_server
from .test_http import free_port, wait_listening
from .test_stdio import server_env

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
USER_PACKAGE = ROOT / "tests" / "fixtures" / "userpkg"
# Looks like /etc/passwd: its first line must never come back in an error.
SECRET_LINE = "root:x:0:0:root:/root:/bin/bash"
MLP_REQUEST = {
    "target": "mylib.layers:ScaledMLP", "init_args": [8, 16], "inputs": ["x:float32[batch,8]"],
    "shapes": [{"batch": 2}],
}


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """``work`` (the server's working folder) beside ``outside``, holding a valid problem, a
    secret-like file and symlinks from inside to each."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir(), outside.mkdir()
    shutil.copy(PROBLEM, outside / "problem.py")
    (outside / "secret").write_text(SECRET_LINE + "\n")
    (outside / "problems.jsonl").write_text('{"level": "' + SECRET_LINE + '"}\n')
    (work / "leak.py").symlink_to(outside / "problem.py")
    (work / "outlink").symlink_to(outside, target_is_directory=True)
    checkout = work / "KernelBench" / "level1"
    checkout.mkdir(parents=True)
    (checkout / "7_Leak.py").symlink_to(outside / "problem.py")
    shutil.copytree(USER_PACKAGE, work / "proj")
    monkeypatch.chdir(work)
    return {"work": work, "outside": outside, "home": tmp_path / "home"}


OUTSIDE_PROBLEMS = (
    "{outside}/problem.py",  # absolute
    "../outside/problem.py",  # dot-dot
    "leak.py",  # a symlink to a file outside
    "outlink/problem.py",  # through a symlinked folder
    "{outside}/problems.jsonl:1/1",  # a JSONL outside
    "KernelBench:1/7",  # a checkout inside whose file leads outside
    "/etc/passwd",
)


async def test_problem_paths_outside_the_roots_are_refused(layout: dict[str, Path]) -> None:
    async with Client(make_server(layout["home"])) as client:
        for spec in OUTSIDE_PROBLEMS:
            problem = spec.format(outside=layout["outside"])
            text = error_text(await client.call_tool("create_run", {"problem": problem, "device": "cpu"}))
            assert "outside the folders this server may use" in text, (spec, text)
            assert "root:x" not in text
        assert (await client.call_tool("list_runs")).structured_content == {"runs": []}


async def test_create_problem_never_writes_or_reads_outside_the_roots(layout: dict[str, Path]) -> None:
    work, outside = layout["work"], layout["outside"]
    async with Client(make_server(layout["home"])) as client:
        for out in (str(outside / "evil2.py"), "../../evil.py", "../outlink/evil.py", "../../../evil3.py"):
            args = {**MLP_REQUEST, "project_root": "proj", "out": out}
            text = error_text(await client.call_tool("create_problem", args))
            assert "outside the folders this server may use" in text, (out, text)
        for field, value in (("project_root", str(outside)), ("project_root", "outlink"),
                             ("captures", [str(outside / "secret")])):
            args = {**MLP_REQUEST, field: value}
            if field == "captures":
                args = {"captures": value, "project_root": "proj"}
            text = error_text(await client.call_tool("create_problem", args))
            assert "outside the folders this server may use" in text, (field, value, text)
    assert sorted(p.name for p in outside.rglob("*")) == ["problem.py", "problems.jsonl", "secret"]
    assert not (work.parent / "evil.py").exists() and not (work.parent.parent / "evil3.py").exists()


async def test_a_file_that_is_no_problem_is_named_not_quoted(layout: dict[str, Path]) -> None:
    work = layout["work"]
    (work / "notes").write_text(SECRET_LINE + "\n")
    (work / "looks.py").symlink_to(work / "notes")
    (work / "bad.jsonl").write_text('{"level": "' + SECRET_LINE + '", "problem_id": 1}\n')
    async with Client(make_server(layout["home"])) as client:
        for spec in ("notes", "looks.py", "bad.jsonl:1/1"):
            text = error_text(await client.call_tool("create_run", {"problem": spec, "device": "cpu"}))
            assert "root:x" not in text and "not a problem" in text, (spec, text)


def side_effect_problem(marker: Path) -> str:
    """A valid problem whose module-level code writes ``marker``."""
    return PROBLEM.read_text() + f"\nopen({str(marker)!r}, 'w').write('ran')\n"


async def test_problem_code_from_a_client_is_refused_where_nothing_jails_it(layout: dict[str, Path]) -> None:
    marker = layout["work"] / "marker"
    server = make_server(layout["home"], problem_sources=False, isolation="process")
    async with Client(server) as client:
        text = error_text(await client.call_tool(
            "create_run", {"problem": side_effect_problem(marker), "device": "cpu"}))
        assert "jails a problem's code" in text and "isolation process" in text
        assert "--allow-problem-source" in text
        assert (await client.call_tool("list_runs")).structured_content == {"runs": []}
    assert not marker.exists()


def jailed_side_effects(marker: Path) -> str:
    """A valid problem whose module-level code tries to write ``marker`` and the server's HOME, and
    goes on where it cannot."""
    return PROBLEM.read_text() + (
        f"\nimport os\nfor _where in ({str(marker)!r}, os.path.expanduser('~/' + {marker.name!r})):\n"
        "    try:\n        open(_where, 'w').write('ran')\n    except OSError:\n        pass\n"
    )


@pytest.mark.slow  # a whole create_run: the problem checked and its eager baseline timed
async def test_problem_code_from_a_client_runs_in_its_jail_where_the_evaluator_jails_it(
    layout: dict[str, Path],
) -> None:
    from stark_mcp.evaluator.sandbox.levels import SandboxPolicy, detect

    if not detect(SandboxPolicy()).jails_problems:
        pytest.skip("this machine has no isolation level that jails problem code")
    marker = layout["work"] / f"marker-{layout['work'].parent.name}"
    home_marker = Path.home() / marker.name
    try:
        async with Client(make_server(layout["home"], problem_sources=False)) as client:
            result = await client.call_tool(
                "create_run", {"problem": jailed_side_effects(marker), "device": "cpu", "budget": 1})
            assert not result.is_error, error_text(result)
            assert result.structured_content["run_id"]
            runs = (await client.call_tool("list_runs")).structured_content["runs"]
            assert len(runs) == 1
        assert not marker.exists() and not home_marker.exists()
    finally:
        home_marker.unlink(missing_ok=True)


def test_a_write_whose_folder_was_swapped_for_a_symlink_is_refused(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "dir").mkdir(parents=True), outside.mkdir()
    roots = AllowedRoots.of([], cwd=work)
    target = roots.resolve("dir/p.py")
    (work / "dir").rmdir()
    (work / "dir").symlink_to(outside, target_is_directory=True)  # swapped in after the check
    with pytest.raises(PathOutsideRoots):
        write_confined(target, "x = 1\n", roots)
    assert list(outside.iterdir()) == []
    # A parent higher up swapped, with the rest of the path made under the symlink's target.
    (work / "a" / "b").mkdir(parents=True)
    deep = roots.resolve("a/b/c/p.py")
    shutil.rmtree(work / "a")
    (work / "a").symlink_to(outside, target_is_directory=True)
    (outside / "b").mkdir()
    with pytest.raises(PathOutsideRoots):
        write_confined(deep, "x = 1\n", roots)
    assert list((outside / "b").iterdir()) == []
    real = work / "real"
    real.mkdir()
    write_confined(roots.resolve("real/p.py"), "x = 1\n", roots)
    assert (real / "p.py").read_text() == "x = 1\n" and [p.name for p in real.iterdir()] == ["p.py"]
    write_confined(roots.resolve("new/deeper/p.py"), "y = 2\n", roots)
    assert (work / "new" / "deeper" / "p.py").read_text() == "y = 2\n"


def http_server(cwd: Path, home: Path, *roots: Path) -> tuple[int, subprocess.Popen[str]]:
    port = free_port()
    args = [a for root in roots for a in ("--root", str(root))]
    env = {**server_env(home), "STARK_ISOLATION": "process"}  # problem text is refused at this level
    process = subprocess.Popen(
        [sys.executable, "-m", "stark_mcp", "serve", "--http", "--port", str(port), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, text=True,
    )
    wait_listening(port, process)
    return port, process


@pytest.mark.slow  # starts a server process
async def test_over_http_paths_outside_the_roots_are_refused_and_root_options_widen_them(
    layout: dict[str, Path], tmp_path: Path,
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "empty.py").write_text("x = 1\n")
    port, process = http_server(layout["work"], layout["home"], extra)
    try:
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp")) as client:
            for spec in OUTSIDE_PROBLEMS:
                problem = spec.format(outside=layout["outside"])
                result = await client.call_tool("create_run", {"problem": problem, "device": "cpu"})
                text = error_text(result)
                assert "outside the folders this server may use" in text and "root:x" not in text
            args: dict[str, Any] = {**MLP_REQUEST, "project_root": "proj", "out": "../../evil.py"}
            assert "outside" in error_text(await client.call_tool("create_problem", args))
            marker = layout["work"] / "marker"
            result = await client.call_tool("create_run", {"problem": side_effect_problem(marker)})
            assert "--allow-problem-source" in error_text(result) and not marker.exists()
            # Inside a --root the path is let through, to the problem's own checks.
            text = error_text(await client.call_tool("create_run", {"problem": str(extra / "empty.py")}))
            assert "missing Model" in text
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert not (tmp_path / "evil.py").exists()


def test_serve_refuses_a_root_that_is_not_a_folder(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stark_mcp", "serve", "--root", str(tmp_path / "nope")],
        capture_output=True, text=True, env=server_env(tmp_path), cwd=tmp_path, timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "is not a folder" in done.stderr
