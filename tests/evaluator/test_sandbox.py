import os
from pathlib import Path

import pytest

from stark_mcp.evaluator.sandbox.env import looks_secret, scrub_env
from stark_mcp.problems import load_problem
from stark_mcp.records import Status
from tests.evaluator.conftest import FIXTURES


def test_secrets_and_unknown_variables_are_dropped() -> None:
    env = scrub_env({
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C",
        "CUDA_VISIBLE_DEVICES": "0", "TORCH_EXTENSIONS_DIR": "/x", "OMP_NUM_THREADS": "2",
        "ANTHROPIC_API_KEY": "sk-ant", "AWS_SECRET_ACCESS_KEY": "a", "GITHUB_TOKEN": "g",
        "DB_PASSWORD": "p", "TORCH_HUB_TOKEN": "t", "RANDOM_APP_SETTING": "r", "CUDA_AUTH_COOKIE": "c",
    })
    assert env["PATH"] == "/usr/bin" and env["CUDA_VISIBLE_DEVICES"] == "0" and env["LC_ALL"] == "C"
    for gone in ("ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DB_PASSWORD",
                 "TORCH_HUB_TOKEN", "RANDOM_APP_SETTING", "CUDA_AUTH_COOKIE"):
        assert gone not in env


def test_overrides_win() -> None:
    env = scrub_env({"CUDA_VISIBLE_DEVICES": "0"},
        {"CUDA_VISIBLE_DEVICES": "", "TORCH_CUDA_ARCH_LIST": "9.0"})
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["TORCH_CUDA_ARCH_LIST"] == "9.0"


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "hf_token", "MY_Credentials", "SSH_PRIVATE"])
def test_secret_names(name: str) -> None:
    assert looks_secret(name)


PROBE = '''
import os, tempfile
import torch, torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        leaked = [k for k in os.environ if "SECRET" in k or "API_KEY" in k]
        if leaked:
            raise RuntimeError(f"saw {leaked}")
        if os.getcwd().startswith(REPO) or not os.getcwd().startswith(tempfile.gettempdir()):
            raise RuntimeError(f"cwd is {os.getcwd()}")
        return torch.relu(a + b)
'''


@pytest.mark.anyio
async def test_candidate_process_sees_no_secrets_and_a_private_cwd(evaluator, monkeypatch) -> None:
    monkeypatch.setenv("STARK_TEST_SECRET_VALUE", "hunter2")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    source = PROBE.replace("REPO", repr(str(FIXTURES.parents[2])))
    result = await evaluator.evaluate(load_problem(str(FIXTURES / "relu_sum.py")), source, device="cpu")
    assert result.status is Status.PASSED, result.message
    assert os.environ["ANTHROPIC_API_KEY"] == "sk-ant-test"


def test_an_import_root_is_readable_inside_the_sandbox_and_hidden_folders_in_it_stay_hidden(tmp_path) -> None:
    import sys

    from stark_mcp.evaluator.sandbox.launch import JailSpec
    from stark_mcp.evaluator.sandbox.levels import detect

    if detect().level != "sandbox":
        pytest.skip("needs the sandbox level (bubblewrap)")
    # Under /tmp (the sandbox's scratch) and behind a 0700 folder (pytest's), as a user's project may be.
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("X = 41\n")
    data = root / "home"  # a data directory inside the project: hidden, even though the project is not
    data.mkdir()
    (data / "stark.db").write_text("secret")
    script = (f"import os, sys; sys.path.insert(0, {str(root)!r}); from pkg import mod; "
              f"print(mod.X + 1, sorted(os.listdir({str(data)!r})))")
    spec = JailSpec(argv=[sys.executable, "-S", "-c", script], env={"PATH": os.environ.get("PATH", "")},
                    hidden=[str(data)], visible=[str(root)])
    seen = _output_of(spec)
    assert seen.strip() == "42 []", seen


def test_where_the_evaluator_was_started_from_stays_hidden(tmp_path, monkeypatch) -> None:
    # Run as a script from /tmp, the evaluator had /tmp itself on sys.path and re-bound it over the
    # scratch read-only: builds failed ("Can't mkdir /tmp/job") and the host's /tmp was readable.
    import sys
    import uuid

    from stark_mcp.evaluator.sandbox.launch import JailSpec
    from stark_mcp.evaluator.sandbox.levels import detect

    if detect().level != "sandbox":
        pytest.skip("needs the sandbox level (bubblewrap)")
    project = tmp_path / "proj"  # where the user ran `python -m stark_mcp` or a script from
    project.mkdir()
    (project / "notes.txt").write_text("secret")
    marker = Path("/tmp") / f"stark-wall-{uuid.uuid4().hex}.txt"  # another evaluation's file, say
    marker.write_text("secret")
    try:
        monkeypatch.chdir(project)
        monkeypatch.setattr(sys, "argv", [str(project / "driver.py")])
        monkeypatch.setattr(sys, "path", ["/tmp", str(project), *sys.path])
        script = f"import os; print(os.path.exists({str(marker)!r}), os.path.exists({str(project)!r}))"
        spec = JailSpec(argv=[sys.executable, "-S", "-c", script], env={"PATH": os.environ.get("PATH", "")})
        assert _output_of(spec).strip() == "False False"
    finally:
        marker.unlink()


def test_a_root_the_candidates_uid_cannot_read_is_named(tmp_path) -> None:
    from stark_mcp.evaluator.sandbox.jail_files import unreadable_root

    root = tmp_path / "proj"
    root.mkdir(mode=0o755)
    # pytest's base folder is 0700: a uid of its own cannot pass it, unless the sandbox rebuilds /tmp.
    blocked = unreadable_root(str(root), "uid", [])
    assert blocked is not None and str(root).startswith(blocked) and blocked != str(root)
    assert unreadable_root(str(root), "sandbox", []) is None
    root.chmod(0o700)
    assert unreadable_root(str(root), "sandbox", []) == str(root)


def test_a_jail_of_its_own_uid_can_name_its_user() -> None:
    # The torch profiler (own-kernel attribution) calls getpass.getuser(); a uid with no passwd entry
    # made it raise KeyError inside the jail and every GPU evaluation lost its kernel list.
    import sys

    from stark_mcp.evaluator.sandbox.launch import JailSpec
    from stark_mcp.evaluator.sandbox.levels import detect

    info = detect()
    if not (info.root and info.level in ("sandbox", "uid")):
        pytest.skip("needs a uid of the jail's own (root, sandbox or uid level)")
    script = "import getpass, os; print(os.getuid() != 0, getpass.getuser())"
    spec = JailSpec(argv=[sys.executable, "-S", "-c", script], env={"PATH": os.environ.get("PATH", "")})
    seen = _output_of(spec)
    own_uid, name = seen.split()
    assert own_uid == "True" and name.startswith("stark"), seen


def _output_of(spec) -> str:
    """Run a jail to its end and return what it printed."""
    import subprocess

    from stark_mcp.evaluator.sandbox.launch import Jail

    read, write = os.pipe()
    with Jail.start(spec, stdout=write, stderr=subprocess.STDOUT) as jail:
        os.close(write)
        with os.fdopen(read) as out:
            seen = out.read()
        jail.wait(30)
    return seen


def test_a_jail_moves_every_thread_to_other_cores() -> None:
    """A spare runner started beside a timing loop starts on other cores than the timed runner's and
    moves onto them when it is taken: every thread of every process of its jail moves."""
    import subprocess
    import sys
    import time

    from stark_mcp.evaluator.sandbox.launch import Jail, JailSpec

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    first, second = cores[0], cores[1]
    script = (
        "import threading, time\n"
        "threads = [threading.Thread(target=time.sleep, args=(30,), daemon=True) for _ in range(3)]\n"
        "[t.start() for t in threads]\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    spec = JailSpec(argv=[sys.executable, "-S", "-c", script], env={"PATH": os.environ.get("PATH", "")},
                    cpus=[first])  # fmt: skip
    read, write = os.pipe()
    with Jail.start(spec, stdout=write, stderr=subprocess.STDOUT) as jail, os.fdopen(read) as out:
        os.close(write)
        assert out.readline().strip() == "ready"

        def allowed() -> set[frozenset[int]]:
            seen = set()
            for pid in jail.pids():
                for tid in os.listdir(f"/proc/{pid}/task"):
                    try:
                        seen.add(frozenset(os.sched_getaffinity(int(tid))))
                    except OSError:
                        pass
            return seen

        python = [p for p in jail.pids() if len(os.listdir(f"/proc/{p}/task")) >= 4]
        assert python, "the jailed interpreter and its threads"
        assert frozenset({first}) in allowed()
        jail.set_cpus([second])
        deadline = time.monotonic() + 5
        while allowed() != {frozenset({second})} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert allowed() == {frozenset({second})}
