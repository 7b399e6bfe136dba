"""The warm evaluator through real ``stark-mcp eval`` processes on the CPU (issue 40): a second eval
is served by the daemon the first one started, with the verdict and exit code of ``--no-daemon``;
a different key gets another daemon; two racing to start one get one, and are served at once; a
killed daemon's socket is replaced, and a daemon killed mid-evaluation costs the client nothing but
an in-process evaluation; an idle daemon exits; a folder others could use is refused; a client
that goes away has its evaluation cancelled. Each test's machine is a runtime folder and a data
home of its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stark_mcp.config import VARIABLES, Settings
from stark_mcp.orchestrator.warm_address import InsecureFolder, compatibility_key, secure_folder
from tests.evaluator.conftest import FIXTURES

DRIVER = "import sys; from stark_mcp.cli import main; main(sys.argv[1:])"
ROOT = FIXTURES.parents[2]
PROBLEM = FIXTURES / "relu_sum.py"


@dataclass(frozen=True)
class Machine:
    env: dict[str, str]
    folder: Path  # the warm evaluators' folder

    def cli(self, *args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", DRIVER, *args], env={**self.env, **extra}, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)

    def evaluate(self, candidate: Path, *options: str, device: str = "cpu",
                 **extra: str) -> tuple[int, dict[str, Any], str]:
        done = self.cli("eval", str(PROBLEM), str(candidate), "--device", device, "--json",
                        "--baselines", "eager", *options, **extra)
        assert done.stdout.strip(), done.stderr
        return done.returncode, json.loads(done.stdout.splitlines()[0]), done.stderr

    def start(self, candidate: Path, *options: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", DRIVER, "eval", str(PROBLEM), str(candidate), "--device", "cpu", "--json",
             "--baselines", "eager", *options],
            env=self.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def status(self) -> dict[int, dict[str, Any]]:
        """pid -> its status, asked over each socket in the folder (quicker than the CLI)."""
        found = {}
        for path in self.folder.glob("eval-*.sock"):
            reply = ask(path, b'{"op": "status"}\n')
            if reply is not None:
                found[reply["pid"]] = reply
        return found

    def daemons(self) -> dict[int, str]:
        """pid -> its line in ``stark-mcp daemon status``."""
        done = self.cli("daemon", "status", timeout=60)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        return {int(m.group(1)): line for line in lines if (m := re.match(r"pid (\d+):", line))}

    def logs(self) -> str:
        return "".join(path.read_text() for path in sorted(self.folder.glob("*.log")))


def machine(base: Path, idle_s: float = 120.0, **extra: str) -> Machine:
    # A short folder of its own: under pytest-xdist's deep tmp_path the socket's path passes the
    # 108 bytes a unix socket's address may hold, and eval then (rightly) evaluates in-process.
    run = Path(tempfile.mkdtemp(prefix="stw-", dir="/tmp"))
    env = {**os.environ, "XDG_RUNTIME_DIR": str(run), "STARK_HOME": str(base / "home"),
           VARIABLES["eval_daemon"]: "1", VARIABLES["eval_daemon_idle_s"]: str(idle_s), **extra}
    return Machine(env, run / "stark-mcp")


def figures_apart(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", text)


def ask(path: Path, request: bytes) -> dict[str, Any] | None:
    with socket.socket(socket.AF_UNIX) as conn:
        try:
            conn.connect(str(path))
        except ConnectionRefusedError:
            return None
        conn.sendall(request)
        line = conn.makefile("rb").readline()
    return json.loads(line) if line else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (its parent, init, has not reaped it yet) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def shut_down(m: Machine) -> None:
    pids = list(m.daemons()) if m.folder.exists() else []
    m.cli("daemon", "stop", "--all", timeout=120)
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(m.folder.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A machine whose daemon the module's first eval starts; stopped (or killed) at the end."""
    m = machine(tmp_path_factory.mktemp("warm"))
    yield m
    shut_down(m)


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_the_second_eval_is_served_warm_with_the_in_process_verdict(warm: Machine) -> None:
    code, first, _ = warm.evaluate(FIXTURES / "torch_ok.py")
    assert code == 0 and first["status"] == "passed"
    (pid,) = warm.daemons()
    assert first["served_by"] == pid  # the first eval started it and was served by it

    code, again, err = warm.evaluate(FIXTURES / "torch_ok.py", "--no-cache")
    assert code == 0 and again["status"] == "passed" and not again["cached"]
    assert again["served_by"] == pid
    assert again["phase_seconds"]["process_start"] < 0.5, again["phase_seconds"]  # warm workers
    assert "eval: " in err  # the evaluator's phases, relayed

    code_in, inproc, _ = warm.evaluate(FIXTURES / "torch_ok.py", "--no-cache", "--no-daemon")
    assert code_in == code and inproc["served_by"] is None
    assert set(inproc) == set(again) and inproc["status"] == again["status"]
    for c in (inproc["correctness"], again["correctness"]):  # trials vary: timed calls are checked too
        assert c["trials_passed"] == c["trials"] and c["tolerance"] == inproc["correctness"]["tolerance"]

    code_w, wrong, _ = warm.evaluate(FIXTURES / "off_by_tolerance.py", "--no-cache")
    code_n, wrong_in, _ = warm.evaluate(FIXTURES / "off_by_tolerance.py", "--no-cache", "--no-daemon")
    assert code_w == code_n == 1
    assert wrong["served_by"] == pid and wrong_in["served_by"] is None
    for field in ("status", "reason", "flags"):
        assert wrong[field] == wrong_in[field], field
    assert figures_apart(wrong["message"]) == figures_apart(wrong_in["message"])  # random trials' errors

    # the human-readable verdict is the same text
    text = warm.cli("eval", str(PROBLEM), str(FIXTURES / "off_by_tolerance.py"), "--device", "cpu",
                    "--baselines", "eager")
    text_in = warm.cli("eval", str(PROBLEM), str(FIXTURES / "off_by_tolerance.py"), "--device", "cpu",
                       "--baselines", "eager", "--no-daemon")
    assert text.returncode == text_in.returncode == 1
    assert figures_apart(text.stdout.splitlines()[0]) == figures_apart(text_in.stdout.splitlines()[0])
    assert list(warm.daemons()) == [pid]
    settled = warm.cli("daemon", "settle", timeout=120)
    assert settled.returncode == 0 and settled.stdout.startswith("settled ("), settled


@pytest.mark.slow
def test_two_clients_racing_to_start_one_get_one_daemon_and_are_served_at_once(tmp_path: Path) -> None:
    m = machine(tmp_path)
    try:
        clients = [m.start(FIXTURES / "torch_ok.py", "--no-cache") for _ in range(2)]
        most = 0

        def watch() -> None:
            nonlocal most
            while any(c.poll() is None for c in clients):
                most = max([most, *(status["active"] for status in m.status().values())])
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        outs = [c.communicate(timeout=300) for c in clients]
        watcher.join()
        served = set()
        for client, (out, err) in zip(clients, outs, strict=True):
            assert client.returncode == 0, err
            data = json.loads(out.splitlines()[0])
            assert data["status"] == "passed"
            served.add(data["served_by"])
        assert len(served) == 1 and list(m.status()) == list(served)  # one daemon served both
        assert m.logs().count("serving key") == 1
        assert most == 2  # both evaluations were in the daemon at once
    finally:
        shut_down(m)


@pytest.mark.slow
def test_a_client_that_goes_away_has_its_evaluation_cancelled(warm: Machine) -> None:
    warm.evaluate(FIXTURES / "torch_ok.py")
    (pid,) = warm.daemons()
    client = warm.start(FIXTURES / "hangs.py", "--no-cache")  # forward never returns
    assert client.stderr is not None
    for line in client.stderr:
        if "eval: load" in line or "eval: correctness" in line:
            break
    wait_for(lambda: warm.status()[pid]["active"] == 1, 30, "the hanging evaluation under way")
    client.kill()  # as a Ctrl-C'd or killed shell would
    client.wait()
    wait_for(lambda: warm.status()[pid]["active"] == 0, 15, "its evaluation cancelled")
    assert "went away: cancelling" in warm.logs()
    code, data, _ = warm.evaluate(FIXTURES / "torch_ok.py", "--no-cache")
    assert code == 0 and data["served_by"] == pid  # still healthy


@pytest.mark.slow
def test_a_request_that_is_no_request_gets_an_error_reply(warm: Machine) -> None:
    warm.evaluate(FIXTURES / "torch_ok.py")
    (pid,) = warm.daemons()
    (path,) = warm.folder.glob("eval-*.sock")
    for request in (b"not json\n", b'{"op": "evaluate"}\n', b'{"op": "explode"}\n',
                    b'{"op": "status", "extra": 1}\n', b"[1, 2]\n", b'{"op": "evaluate", "key": "x", '
                    b'"problem": {}, "source": "", "device": "tpu", "eval_settings": {}}\n'):
        reply = ask(path, request)
        assert reply is not None and reply["op"] == "failed" and reply["kind"] == "request", (request, reply)
        assert reply["message"].startswith("bad request"), reply
    assert list(warm.daemons()) == [pid] and alive(pid)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another uid needs root")
def test_a_connection_from_another_uid_is_refused(warm: Machine) -> None:
    warm.evaluate(FIXTURES / "torch_ok.py")
    (path,) = warm.folder.glob("eval-*.sock")
    # The folder keeps everyone else out; a second name for the socket where uid 65534 can reach it
    # stands for a folder check that failed, so only the daemon's own check is left.
    public = Path(tempfile.mkdtemp(dir=path.parent.parent.parent))
    os.chmod(public, 0o755)
    for parent in public.parents:
        if parent == Path("/tmp"):
            break
        os.chmod(parent, parent.stat().st_mode | 0o011)  # traversable, not listable
    exposed = public / "exposed.sock"
    os.link(path, exposed)
    os.chmod(exposed, 0o777)
    try:
        probe = (
            "import os, socket, sys; os.setgid(65534); os.setuid(65534)\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "try:\n"
            "    s.sendall(b'{\"op\": \"status\"}\\n'); print(repr(s.makefile('rb').readline()))\n"
            "except (BrokenPipeError, ConnectionResetError):\n"
            "    print('closed')"
        )
        done = subprocess.run([sys.executable, "-c", probe, str(exposed)], capture_output=True, text=True,
                              timeout=60)
    finally:
        exposed.unlink()
        os.chmod(path, 0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("b''", "closed")  # connected, and closed without a word
    assert "refused a connection from uid 65534" in warm.logs()


@pytest.mark.slow
def test_another_key_gets_another_daemon_and_stop_stops_it(warm: Machine) -> None:
    warm.evaluate(FIXTURES / "torch_ok.py")
    (pid,) = warm.daemons()
    # a variable that reaches the jails: another environment, so another evaluator's verdicts
    code, data, _ = warm.evaluate(FIXTURES / "torch_ok.py", TORCH_WARM_TEST="1")
    assert code == 0 and data["status"] == "passed"
    other = data["served_by"]
    assert other not in (None, pid)
    lines = warm.daemons()
    assert set(lines) == {pid, other}
    assert "used by eval here" in lines[pid] and "another key" in lines[other]
    stopped = warm.cli("daemon", "stop", timeout=120, TORCH_WARM_TEST="1")
    assert stopped.stdout.strip() == f"stopped pid {other}", stopped.stdout
    assert not alive(other) and list(warm.daemons()) == [pid]


@pytest.mark.slow
def test_a_killed_daemon_is_replaced_and_an_idle_one_exits(tmp_path: Path) -> None:
    m = machine(tmp_path, idle_s=4.0)
    try:
        # killed mid-evaluation: the client says so and evaluates in its own process, once
        client = m.start(FIXTURES / "torch_ok.py")
        assert client.stderr is not None
        for line in client.stderr:
            if "eval: load" in line:
                break
        (first,) = m.daemons()
        os.kill(first, signal.SIGKILL)
        out, err = client.communicate(timeout=300)
        assert client.returncode == 0, err
        data = json.loads(out.splitlines()[0])
        assert data["status"] == "passed" and data["served_by"] is None
        assert "warm evaluator stopped mid-evaluation" in err and "evaluating in this process" in err
        wait_for(lambda: not alive(first), 10, "the killed daemon gone")
        (sock,) = m.folder.glob("eval-*.sock")  # left behind: nobody listens on it

        # the next eval finds the stale socket, starts a new daemon in its place
        code, again, _ = m.evaluate(FIXTURES / "torch_ok.py", "--no-cache")
        assert code == 0 and again["served_by"] not in (None, first)
        second = again["served_by"]
        assert sock.exists() and alive(second)

        # idle for 4 s: it exits and removes its socket
        wait_for(lambda: not alive(second), 30, "the idle daemon's exit")
        assert not sock.exists()
        assert "idle for 4 s: exiting" in m.logs()
    finally:
        shut_down(m)


def test_the_key_follows_what_reaches_the_evaluator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.from_env({"STARK_HOME": str(tmp_path / "home")})
    env = {"PATH": "/usr/bin", "HOME": "/root"}
    key = compatibility_key(settings, env)
    assert key == compatibility_key(settings, dict(env))
    # what reaches builds, jails and the device: another key
    for name, value in (("CUDA_VISIBLE_DEVICES", "1"), ("TORCH_CUDA_ARCH_LIST", "9.0"),
                        ("TRITON_CACHE_DIR", "/x"), ("LD_LIBRARY_PATH", "/opt"), ("PATH", "/opt/bin")):
        assert compatibility_key(settings, {**env, name: value}) != key, name
    for field, value in (("isolation", "process"), ("gpus", "1"), ("cache_dir", tmp_path / "c2"),
                         ("home", tmp_path / "home2")):
        assert compatibility_key(settings.model_copy(update={field: value}), env) != key, field
    # what does not: a secret-looking variable (never passed on), an unrelated one, the LLM, the idle time
    for name, value in (("ANTHROPIC_API_KEY", "k"), ("EDITOR", "vi")):
        assert compatibility_key(settings, {**env, name: value}) == key, name
    for field, value in (("model", "other"), ("eval_daemon_idle_s", 5.0), ("log_level", "DEBUG")):
        assert compatibility_key(settings.model_copy(update={field: value}), env) == key, field
    monkeypatch.setattr(sys, "executable", "/other/python")
    assert compatibility_key(settings, env) != key


def test_a_folder_others_could_use_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "stark-mcp"
    assert secure_folder(folder) == folder and (folder.stat().st_mode & 0o777) == 0o700
    os.chmod(folder, 0o750)
    with pytest.raises(InsecureFolder, match="open to others"):
        secure_folder(folder)
    os.chmod(folder, 0o700)
    link = tmp_path / "link"
    link.symlink_to(folder)
    with pytest.raises(InsecureFolder, match="symbolic link"):
        secure_folder(link)
    plain = tmp_path / "file"
    plain.write_text("")
    with pytest.raises(InsecureFolder, match="not a folder"):
        secure_folder(plain)
    if os.geteuid() == 0:
        os.chown(folder, 65534, 65534)
        with pytest.raises(InsecureFolder, match="belongs to uid 65534"):
            secure_folder(folder)


@pytest.mark.slow
def test_eval_with_a_refused_folder_evaluates_in_process_and_says_why(tmp_path: Path) -> None:
    m = machine(tmp_path)
    m.folder.mkdir(mode=0o777)
    os.chmod(m.folder, 0o777)
    # a candidate the static checks refuse: the verdict comes without a worker's start
    code, data, err = m.evaluate(FIXTURES / "no_model_new.py")
    assert code in (1, 3) and data["served_by"] is None
    assert "no warm evaluator" in err and "open to others" in err and "evaluating in this process" in err
    assert list(m.folder.iterdir()) == []  # nothing started, nothing bound there
    shutil.rmtree(m.folder.parent)


OWN_PHASES = ("load", "inputs", "reference", "correctness", "compare", "timing")


@pytest.mark.gpu
def test_on_the_gpu_a_re_evaluation_from_the_cli_is_its_own_work_and_little_more(tmp_path: Path) -> None:
    import torch  # here, not at the module's import: the CPU tests' processes never need it

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    m = machine(tmp_path)
    try:
        code, first, err = m.evaluate(FIXTURES / "torch_ok.py", device="cuda")
        assert code == 0 and first["device"] == "cuda", err
        started = time.monotonic()
        code, again, err = m.evaluate(FIXTURES / "torch_ok.py", "--no-cache", device="cuda")
        wall = time.monotonic() - started  # to the CLI's exit: an upper bound of its time to verdict
        assert code == 0 and again["served_by"] == first["served_by"] is not None, err
        assert again["phase_seconds"]["process_start"] < 0.3, again["phase_seconds"]
        own = sum(again["phase_seconds"].get(p, 0.0) for p in OWN_PHASES)
        assert wall - own < 2.0, (wall, own, again["phase_seconds"])  # issue 40's target
    finally:
        shut_down(m)
