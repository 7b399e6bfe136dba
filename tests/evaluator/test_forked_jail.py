"""The forked launcher (sandbox/zygote.py) builds the jail bubblewrap builds, and nothing of the zygote
is reachable from inside it. Real jails, as root at the sandbox level (skipped elsewhere)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stark_mcp.evaluator.sandbox.forked import (
    INTERPRETER,
    ZYGOTE_FD_ARG,
    ForkedProcess,
    ZygoteClient,
    ZygoteUnavailable,
)
from stark_mcp.evaluator.sandbox.launch import Jail, JailSpec, Mount
from stark_mcp.evaluator.sandbox.levels import detect

PROBE = r'''
import ctypes, fcntl, json, os, resource, socket, sys

def status():
    with open("/proc/self/status") as fh:
        rows = [line.split(":", 1) for line in fh]
    keep = ("Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd")
    return {k: v.split() for k, v in rows if k in keep}

def mounts():
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            f = line.split()
            out.append([f[4], f[5], f[f.index("-") + 1]])
    return sorted(out)

def writable(path):
    try:
        with open(os.path.join(path, ".probe"), "w"):
            pass
        os.unlink(os.path.join(path, ".probe"))
        return True
    except OSError:
        return False

def reach_init():
    found = []
    for name in ("environ", "mem", "root/etc/hostname"):
        try:
            with open(f"/proc/1/{name}", "rb") as fh:
                fh.read(1)
            found.append(name)
        except OSError:
            pass
    for name in ("fd", "fdinfo", "cwd", "root", "map_files"):  # the init's descriptors and its root
        try:
            os.listdir(f"/proc/1/{name}")
            found.append(f"list {name}")
        except OSError:
            pass
    for name in ("exe", "ns/mnt", "ns/pid"):
        try:
            os.close(os.open(f"/proc/1/{name}", os.O_RDONLY))
            found.append(f"open {name}")
        except OSError:
            pass
    try:
        os.kill(1, signal_zero := 0)
        found.append("signal")
    except OSError:
        pass
    if ctypes.CDLL(None, use_errno=True).ptrace(16, 1, None, None) == 0:
        found.append("ptrace")
    return found

def mmapped(size):
    """Whether malloc takes ``size`` bytes from a mapping of its own (MALLOC_MMAP_MAX_=0 forbids it)."""
    libc = ctypes.CDLL(None)
    fields = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    info = type("Info", (ctypes.Structure,), {"_fields_": [(f, ctypes.c_size_t) for f in fields]})
    libc.mallinfo2.restype = info
    libc.malloc.restype = ctypes.c_void_p
    before = libc.mallinfo2().hblks
    block = libc.malloc(size)
    after = libc.mallinfo2().hblks
    libc.free(ctypes.c_void_p(block))
    return after > before

try:
    socket.socket().connect(("127.0.0.1", 9))
    loopback = "connected"
except OSError as exc:
    loopback = exc.errno
with open("/proc/self/cgroup") as fh:
    cgroup = fh.read()
print(json.dumps({
    "status": status(), "mounts": mounts(), "cwd": os.getcwd(), "env": dict(os.environ),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
    # what a program it starts gets at 0-2 (nvcc fails when its stdin is closed)
    "stdio": [[os.get_inheritable(fd), fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE] for fd in (0, 1, 2)],
    "limits": [resource.getrlimit(getattr(resource, f"RLIMIT_{r}")) for r in ("NPROC", "FSIZE", "CORE")],
    "cgroup": cgroup, "interfaces": sorted(n for _, n in socket.if_nameindex()), "loopback": loopback,
    "writable": {p: writable(p) for p in ("/", "/usr", "/tmp", "/tmp/out", "/tmp/in", "/dev", "/dev/shm")},
    "dev": sorted(os.listdir("/dev")), "sys_path": sys.path, "argv": sys.argv[1:], "init": reach_init(),
    "hidden": os.listdir(HIDDEN), "mmapped": mmapped(64 << 20),
}))
'''

pytestmark = pytest.mark.skipif(
    not (detect().level == "sandbox" and detect().root),
    reason="the forked launcher runs as root at the sandbox level",
)


def _zygote_env() -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONUNBUFFERED": "1"}
    if os.environ.get("PYTHONPATH"):  # where stark_mcp is found on a machine without an install of it
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@pytest.fixture(scope="module")
def zygote():
    client = ZygoteClient.start(_zygote_env())
    yield client
    client.close()


def _probe_root(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "probe"
    root.mkdir(exist_ok=True)
    hidden = root / "secret-data"  # a data folder inside an import root: hidden all the same
    hidden.mkdir(exist_ok=True)
    (hidden / "notes.txt").write_text("secret")
    (root / "jailprobe.py").write_text(PROBE.replace("HIDDEN", repr(str(hidden))))
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    inbox.mkdir(exist_ok=True)
    outbox.mkdir(exist_ok=True)
    return root, hidden, inbox


def _run(spec: JailSpec, zygote: ZygoteClient | None, pass_fds: tuple[int, ...] = ()) -> tuple[Jail, str]:
    read, write = os.pipe()
    jail = Jail.start(
        spec, detect(), pass_fds=pass_fds, stdout=write, stderr=subprocess.STDOUT, zygote=zygote
    )
    os.close(write)
    with os.fdopen(read) as out:
        seen = out.read()
    jail.wait(30)
    return jail, seen


def _spec(tmp_path: Path) -> JailSpec:
    root, hidden, inbox = _probe_root(tmp_path)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1"}
    env["MALLOC_MMAP_MAX_"] = "0"  # read by glibc at a fresh start; a forked runner sets it itself
    return JailSpec(
        argv=[*INTERPRETER, "-m", "jailprobe", "extra", "args"],
        env=env,
        mounts=[Mount(str(inbox), "/tmp/in"), Mount(str(tmp_path / "out"), "/tmp/out", writable=True)],
        hidden=[str(hidden)],
        visible=[str(root)],
        cpus=[sorted(os.sched_getaffinity(0))[-1]],
    )


def test_a_forked_jail_is_the_jail_bubblewrap_builds(zygote, tmp_path) -> None:
    """Seen from inside: the same uid and no capability, the same mounts with the same options, the
    same environment, descriptors, limits, cgroup, network, /dev and import path. Where the forked
    jail differs, it is stricter: an empty capability bounding set, /proc/sys read-only."""
    keep = os.pipe()
    spec = _spec(tmp_path)
    spec.argv = [*spec.argv, str(keep[0])]
    forked_jail, forked = _run(spec, zygote, pass_fds=(keep[0],))
    assert type(forked_jail.proc).__name__ == "ForkedProcess", "not forked"
    assert forked_jail.wait(5) == 0, forked
    spec_b = _spec(tmp_path)
    spec_b.argv = [*spec_b.argv, str(keep[0])]
    _, plain = _run(spec_b, None, pass_fds=(keep[0],))
    for fd in keep:
        os.close(fd)
    a, b = json.loads(forked.strip().splitlines()[-1]), json.loads(plain.strip().splitlines()[-1])
    bounding = a["status"].pop("CapBnd"), b["status"].pop("CapBnd")
    assert int(bounding[0][0], 16) & ~int(bounding[1][0], 16) == 0
    for seen in (a, b):  # each jail has a sandbox uid of its own, named in its environment
        uids = {int(v) for v in seen["status"].pop("Uid") + seen["status"].pop("Gid")}
        assert len(uids) == 1 and min(uids) >= detect().uid_base, uids
        assert seen["env"].pop("USER") == seen["env"].pop("LOGNAME") == f"stark{min(uids)}"
    assert a["status"] == b["status"]
    assert set(a["status"]["CapEff"] + a["status"]["CapPrm"]) == {"0" * 16}
    assert a["status"]["NoNewPrivs"] == ["1"]
    extra = [m for m in a["mounts"] if m not in b["mounts"]]
    assert [m for m in b["mounts"] if m not in a["mounts"]] == []
    assert all(m[1].startswith("ro,") for m in extra), extra
    env_a, env_b = dict(a.pop("env")), dict(b.pop("env"))
    assert env_a == env_b
    for key in a:
        if key not in ("status", "mounts"):
            assert a[key] == b[key], key
    assert a["pids"] == [1, 2]
    writable = {"/tmp", "/tmp/out"}  # /dev/shm is an empty tmpfs of root's, as under bubblewrap
    assert a["writable"] == {path: path in writable for path in a["writable"]}
    assert a["hidden"] == [] and a["init"] == [] and a["interfaces"] == ["lo"] and not a["mmapped"]
    assert a["argv"] == ["extra", "args", str(keep[0])] and a["fds"][:3] == [0, 1, 2]


def test_a_forked_jail_holds_only_the_descriptors_it_was_given(zygote, tmp_path) -> None:
    """The zygote's socket, its other children's descriptors and whatever the worker had open are gone:
    a jail that listed the zygote's socket could ask it for a jail of its own choosing."""
    unrelated = os.open("/dev/null", os.O_RDONLY)
    given = os.pipe()
    spec = _spec(tmp_path)
    spec.argv = [*spec.argv, str(given[1])]
    try:
        jail, seen = _run(spec, zygote, pass_fds=(given[1],))
    finally:
        os.close(unrelated)
        for fd in given:
            os.close(fd)
    fds = json.loads(seen.strip().splitlines()[-1])["fds"]
    # stdio, the descriptor it was given, and the one listing /proc/self/fd
    assert fds[:3] == [0, 1, 2] and given[1] in fds and len(fds) == 5, fds


def test_a_jail_dies_with_its_zygote_and_the_worker_hears_of_it(tmp_path) -> None:
    client = ZygoteClient.start(_zygote_env())
    spec = _spec(tmp_path)
    spec.argv = [*INTERPRETER, "-m", "time_waster"]
    waster = "import time\nprint('up', flush=True)\ntime.sleep(300)\n"
    (tmp_path / "probe" / "time_waster.py").write_text(waster)
    read, write = os.pipe()
    jail = Jail.start(spec, detect(), stdout=write, stderr=subprocess.STDOUT, zygote=client)
    os.close(write)
    with os.fdopen(read) as out:
        assert out.readline().strip() == "up"
        pids = jail.pids()
        assert len(pids) >= 3  # the jail's session, its init, the module
        os.kill(client.proc.pid, signal.SIGKILL)
        assert jail.wait(10) is not None
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(os.path.exists(f"/proc/{p}") for p in pids)
    jail.close()
    client.close()


def test_a_jail_that_cannot_be_built_is_refused_with_the_step_named(tmp_path) -> None:
    client = ZygoteClient.start(_zygote_env())
    try:
        request = {
            "module": "json.tool", "args": [], "env": {}, "uid": None, "cgroup_procs": None, "limits": {},
            "cpus": None, "chdir": "/", "fd_targets": [],
            "steps": [{"kind": "ro-bind", "dest": "/", "src": "/"},
                      {"kind": "ro-bind", "dest": "/tmp/x", "src": str(tmp_path / "missing")}],
        }
        with pytest.raises(ZygoteUnavailable, match="missing"):
            client.start_jail(request, [sys.stdout.fileno(), sys.stderr.fileno()])
        assert not client.alive()  # later jails go through bubblewrap
    finally:
        client.close()


CUDA_PROBE = """
import json, os
import torch
x = torch.ones(1024, device="cuda")
print(json.dumps({"sum": x.sum().item(), "count": torch.cuda.device_count(),
                  "name": torch.cuda.get_device_name(0), "dev": sorted(os.listdir("/dev")),
                  "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}))
"""


@pytest.mark.gpu
def test_a_forked_jail_computes_on_its_one_gpu(zygote, tmp_path) -> None:
    """The zygote never touches CUDA, so its child can: the jail sees the one GPU it was given,
    through the same device nodes and CUDA_VISIBLE_DEVICES as under bubblewrap."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    runs = []
    for launcher in (zygote, None):
        spec = _spec(tmp_path)
        (tmp_path / "probe" / "cudaprobe.py").write_text(CUDA_PROBE)
        spec.argv, spec.gpu = [*INTERPRETER, "-m", "cudaprobe"], 0
        jail, seen = _run(spec, launcher)
        assert jail.wait(5) == 0, seen
        runs.append((type(jail.proc).__name__, json.loads(seen.strip().splitlines()[-1])))
        jail.close()
    (kind, forked), (_, plain) = runs
    assert kind == "ForkedProcess"
    assert forked == plain
    assert forked["sum"] == 1024 and forked["count"] == 1
    assert any(name.startswith("nvidia") for name in forked["dev"])


def test_a_module_the_zygote_preloaded_runs_as_python_m_runs_it(tmp_path) -> None:
    """The runner module is imported by the zygote ahead of time; run in a jail it is ``__main__``,
    as under ``python -m``, and says nothing else (runpy warned into every candidate's log when the
    preloaded copy stayed in sys.modules)."""
    root = tmp_path / "probe"
    root.mkdir()
    (root / "quiet").mkdir()
    (root / "quiet" / "__init__.py").write_text("")
    (root / "quiet" / "main.py").write_text("if __name__ == '__main__':\n    print('main ran', __name__)\n")
    paths = [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**_zygote_env(), "PYTHONPATH": os.pathsep.join(paths)}
    client = ZygoteClient.start(env, ("quiet.main",))
    try:
        spec = JailSpec(argv=[*INTERPRETER, "-m", "quiet.main"], env=env, visible=[str(root)])
        jail, seen = _run(spec, client)
        assert type(jail.proc).__name__ == "ForkedProcess"
        assert seen == "main ran __main__\n"
        jail.close()
    finally:
        client.close()


FAKE_WORKER = """
import os, sys, time
from stark_mcp.evaluator.sandbox.forked import INTERPRETER, ZYGOTE_FD_ARG, ZygoteClient
from stark_mcp.evaluator.sandbox.launch import Jail, JailSpec
from stark_mcp.evaluator.sandbox.levels import detect

zygote = ZygoteClient.connect(int(sys.argv[-1][len(ZYGOTE_FD_ARG):]))
spec = JailSpec(argv=[*INTERPRETER, "-m", "time_waster"], env={"PYTHONPATH": ROOT}, visible=[ROOT])
jail = Jail.start(spec, detect(), stdout=1, stderr=2, zygote=zygote)
os.write(1, f"jail {type(jail.proc).__name__} {jail.proc.pid}\\n".encode())  # one write: lines stay whole
time.sleep(300)
"""


def test_what_a_worker_asked_for_dies_with_its_connection(tmp_path) -> None:
    """A worker the zygote forked asks it for jails on a connection of its own; when the worker dies
    (the parent killed it, say, cancelling its command), the zygote kills every jail it asked for."""
    root = tmp_path / "probe"
    root.mkdir()
    (root / "time_waster.py").write_text("import os, time\nos.write(1, b'up\\n')\ntime.sleep(300)\n")
    (root / "fake_worker.py").write_text(FAKE_WORKER.replace("ROOT", repr(str(root))))
    paths = [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**_zygote_env(), "PYTHONPATH": os.pathsep.join(paths)}
    client = ZygoteClient.start(env)
    read, write = os.pipe()
    errors = os.open(tmp_path / "worker.err", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        worker = client.start_worker("fake_worker", [ZYGOTE_FD_ARG + "{zygote_fd}"], env, [write, errors], [])
        os.close(write)
        os.close(errors)
        with os.fdopen(read) as out:
            said = [out.readline().split() for _ in range(2)]
        assert all(said), (said, worker.poll(), (tmp_path / "worker.err").read_text())
        jail_line = next(line for line in said if line[0] == "jail")
        assert sorted(line[0] for line in said) == ["jail", "up"] and jail_line[1] == "ForkedProcess", said
        jail = int(jail_line[-1])
        jail_pids = [jail, *_descendants(jail)]
        assert len(jail_pids) == 3, jail_pids  # its session, its init, the module
        assert _comm(worker.pid) == "stark-fake_work"  # the kernel keeps 15 bytes of a name
        os.killpg(worker.pid, signal.SIGKILL)
        assert worker.wait(10) == 128 + signal.SIGKILL
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{p}") for p in jail_pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in jail_pids if os.path.exists(f"/proc/{p}")]
        assert client.alive()  # the zygote itself serves on
    finally:
        client.close()


def _descendants(pid: int) -> list[int]:
    from stark_mcp.evaluator.sandbox.launch import descendants

    return descendants(pid)


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as fh:
        return fh.read().strip()


def test_a_runner_the_zygote_half_built_is_started_afresh_by_bubblewrap(zygote, monkeypatch) -> None:
    """A forked jail that fails after its runner started (its hello already on the socket) is not
    retried on the same descriptors: bubblewrap starts a runner on fresh ones, which says hello once.
    Falling back inside the jail, on the same socket, had the worker read the stale runner's hello
    as the start of the next frame (a channel error, seen once under load)."""
    import select

    from stark_mcp.evaluator.trusted.runners import RunnerHandle

    real = ZygoteClient.start_jail

    def half_built(self, request, fds):
        real(self, request, fds)
        time.sleep(1.5)  # the forked runner says hello meanwhile
        raise ZygoteUnavailable("failed late, for this test")

    monkeypatch.setattr(ZygoteClient, "start_jail", half_built)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONUNBUFFERED": "1"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    runner = RunnerHandle("candidate", "cpu", 0.0)
    try:
        runner.start(JailSpec(argv=[], env=env), detect(), zygote=zygote)
        assert type(runner.jail.proc).__name__ == "Popen"  # bubblewrap's
        hello = runner._hello(time.monotonic() + 120)  # the kernel names the process that said it
        assert hello in _descendants(runner.jail.proc.pid), "a hello from the half-built jail's runner"
        assert not select.select([runner._sock], [], [], 1.0)[0], "a second hello on the runner's socket"
    finally:
        runner.close()


def test_a_worker_forked_for_a_cancelled_start_is_killed(monkeypatch) -> None:
    """Cancelling a worker's start while the zygote forks it (the request runs in a thread that goes
    on) leaves no worker behind: once forked, it is killed, since no client will ever stop it."""
    import asyncio
    import threading

    from stark_mcp.evaluator.host.worker_handles import WorkerClient

    asked, go, forked = threading.Event(), threading.Event(), []
    start_worker = ZygoteClient.start_worker

    def held(self, *args, **kwargs):
        asked.set()
        go.wait(60)
        proc = start_worker(self, *args, **kwargs)
        forked.append(proc)
        return proc

    monkeypatch.setattr(ZygoteClient, "start_worker", held)

    async def cancel_then_fork() -> None:
        client = WorkerClient("cpu", None, hidden=[])
        start = asyncio.ensure_future(client._start())
        assert await asyncio.to_thread(asked.wait, 60)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        assert client.proc is None
        go.set()
        deadline = time.monotonic() + 60
        while not forked and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # the callback that kills it runs on this loop

    asyncio.run(cancel_then_fork())
    (proc,) = forked
    assert proc.wait(30) == 128 + signal.SIGKILL


def _half_built(monkeypatch) -> list:
    """Every forked jail fails after it started (as a late failure would): returns what was forked."""
    real, forked = ZygoteClient.start_jail, []

    def half_built(self, request, fds):
        forked.append(real(self, request, fds))
        time.sleep(1.0)  # the forked process runs meanwhile, on the descriptors it was given
        raise ZygoteUnavailable("failed late, for this test")

    monkeypatch.setattr(ZygoteClient, "start_jail", half_built)
    return forked


def test_a_builder_the_zygote_half_built_is_started_afresh_by_bubblewrap(
    tmp_path, monkeypatch, capfd
) -> None:
    """A builder is forked from the zygote; one whose jail failed after it started is started again
    by bubblewrap on a fresh socket and log, and the half-built one is gone."""
    import asyncio

    from stark_mcp.evaluator.host.candidate_builds import BuildCache
    from stark_mcp.evaluator.host.device_probe import cpu_info
    from stark_mcp.evaluator.host.extension_builds import ExtensionCache
    from stark_mcp.evaluator.host.integrity import Integrity

    root = tmp_path / "cache"
    integrity = Integrity(root)
    extensions = ExtensionCache(root / "extensions", root / "toolchain", integrity)
    cache = BuildCache(root / "builds", integrity, extensions, fork=True)
    forked = _half_built(monkeypatch)

    async def launch_and_check() -> None:
        # in one event loop: bubblewrap dies with the thread that started it (--die-with-parent),
        # and asyncio.run ends the executor's threads when it returns
        builder = await cache._launch(cpu_info(), detect(), None)
        try:
            assert len(forked) == 1 and type(builder.jail.proc).__name__ == "Popen"  # bubblewrap's
            assert forked[0].wait(30) is not None  # the half-built builder was killed with its jail
            assert "bubblewrap starts a builder the zygote could not" in capfd.readouterr().err
            assert builder.jail.poll() is None and builder.log_path.exists()
        finally:
            builder.discard()

    asyncio.run(launch_and_check())


def test_a_compile_jail_the_zygote_half_built_is_started_afresh_on_an_empty_folder(
    tmp_path, monkeypatch, capfd
) -> None:
    import asyncio

    from stark_mcp.evaluator.host.build_toolchain import COMPILE_MODULE
    from stark_mcp.evaluator.host.extension_builds import ExtensionCache
    from stark_mcp.evaluator.host.integrity import Integrity

    out, job = tmp_path / "out", tmp_path / "job"
    out.mkdir()
    job.mkdir()
    (out / "main.o").write_bytes(b"what a killed compile left")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    # compile_main refusing its arguments: a run that writes its log and nothing else
    spec = JailSpec(
        argv=[*INTERPRETER, "-m", COMPILE_MODULE, "/tmp/out/missing.json", "/tmp/out", "--cpus", "x"],
        env=env,
        name="compile",
        mounts=[Mount(str(out), "/tmp/out", writable=True)],
    )
    extensions = ExtensionCache(tmp_path / "ext", tmp_path / "toolchain", Integrity(tmp_path), fork=True)

    async def start_and_check() -> None:  # one event loop: see the builder's test above
        spare = tmp_path / "first"
        spare.mkdir()
        jail = await extensions._start_compile_jail(spec, detect(), job / "jail.log", spare)
        try:  # forked, where the zygote can
            assert isinstance(jail.proc, ForkedProcess) and await asyncio.to_thread(jail.wait, 60) == 2
        finally:
            jail.close()
        forked = _half_built(monkeypatch)
        jail = await extensions._start_compile_jail(spec, detect(), job / "jail.log", out)
        try:
            assert len(forked) == 1 and type(jail.proc).__name__ == "Popen"
            assert await asyncio.to_thread(jail.wait, 60) == 2
            assert forked[0].wait(30) is not None
            assert "bubblewrap starts a compile the zygote could not" in capfd.readouterr().err
            assert list(out.iterdir()) == []  # emptied before the retry
            log = (job / "jail.log").read_text()
            assert log.count("--cpus must list CPU numbers") == 1, log  # the retry's run alone
        finally:
            jail.close()

    asyncio.run(start_and_check())
