"""The command lines that build a jail (``launch.Jail`` runs them): the launcher chain as argv (join the
cgroup, prlimit, bubblewrap, setpriv, taskset), the same plan as a request to the zygote when it
forks the jail instead, and bubblewrap's report of its child's pid. Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import TypedDict

from stark_mcp.evaluator.sandbox.jail_spec import JailSpec
from stark_mcp.evaluator.sandbox.layout import SCRATCH_INSIDE, MountStep, bwrap_args
from stark_mcp.evaluator.sandbox.levels import IsolationInfo

# Joins every group named before ``--`` (a v2 group, and a v1 memory group on hybrid machines), then
# runs the rest: the jail's first process is in all of them before any of its code runs.
JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'


class ForkRequest(TypedDict):
    """What the zygote needs to fork a jail (``zygote.py`` reads it off its socket as JSON)."""

    module: str
    args: list[str]
    steps: list[dict[str, object]]  # MountStep.to_json() of each mount step
    env: dict[str, str]
    uid: int | None
    cgroup_procs: list[str]
    limits: dict[str, int]  # nproc, fsize, core: what prlimit sets on the bubblewrap path
    cpus: list[int] | None
    chdir: str
    fd_targets: list[int]


def jail_argv(
    spec: JailSpec,
    info: IsolationInfo,
    level: str,
    uid: int | None,
    cgroup_procs: list[str] | None,
    steps: list[MountStep],
    env: dict[str, str],
) -> list[str]:
    """The launcher chain around ``spec.argv``; ``steps`` are the sandbox's mounts (level sandbox),
    ``cgroup_procs`` the groups' ``cgroup.procs`` files to join (None: no cgroup)."""
    inner = list(spec.argv)
    if spec.cpus:
        inner = ["taskset", "-c", ",".join(map(str, spec.cpus)), *inner]
    if uid is not None and info.setpriv:
        inner = [
            info.setpriv,
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
            *inner,
        ]
    if level == "sandbox":
        inner = bwrap_argv(info, steps, env) + ["--", *inner]
    if info.prlimit:
        inner = [
            info.prlimit,
            f"--nproc={spec.max_processes}",
            f"--fsize={spec.max_file_bytes}",
            "--core=0",
            "--",
            *inner,
        ]
    if cgroup_procs is not None:
        inner = ["/bin/sh", "-c", JOIN, "stark-join", *cgroup_procs, "--", *inner]
    return inner


def bwrap_argv(info: IsolationInfo, steps: list[MountStep], env: dict[str, str]) -> list[str]:
    argv = [
        info.bwrap or "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if not info.root:
        argv += ["--unshare-user", "--disable-userns"]
    argv += bwrap_args(steps)
    argv += ["--chdir", SCRATCH_INSIDE, "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv


def fork_request(
    spec: JailSpec,
    info: IsolationInfo,
    call: tuple[str, list[str]],
    steps: list[MountStep],
    env: dict[str, str],
    uid: int | None,
    cgroup_procs: list[str],
    pass_fds: tuple[int, ...],
    stdout: int | None,
    stderr: int | None,
) -> tuple[ForkRequest, list[int]]:
    """What the zygote needs to build this jail as ``jail_argv`` would: the same mount plan, limits,
    uid, cgroup and cores, and the descriptors at the numbers the command names."""
    out = sys.stdout.fileno() if stdout is None else stdout
    err = out if stderr == subprocess.STDOUT else (sys.stderr.fileno() if stderr is None else stderr)
    limits: dict[str, int] = {}
    if info.prlimit:  # what prlimit sets on the bubblewrap path
        limits = {"nproc": spec.max_processes, "fsize": spec.max_file_bytes, "core": 0}
    request: ForkRequest = {
        "module": call[0],
        "args": call[1],
        "steps": [step.to_json() for step in steps],
        "env": env,
        "uid": uid,
        "cgroup_procs": cgroup_procs,
        "limits": limits,
        "cpus": spec.cpus,
        "chdir": SCRATCH_INSIDE,
        "fd_targets": list(pass_fds),
    }
    return request, [out, err, *pass_fds]


def host_env() -> dict[str, str]:
    """bubblewrap itself gets a minimal environment; the jailed process gets ``--setenv`` values only."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def insert_after(argv: list[str], marker: str, extra: list[str]) -> list[str]:
    i = argv.index(marker)
    return argv[: i + 1] + extra + argv[i + 1 :]


def read_child_pid(fd: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """bubblewrap writes ``{"child-pid": N}`` once the sandbox exists."""
    import select

    data = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
                if b"}" in data:
                    break
            elif proc.poll() is not None:
                break
    finally:
        os.close(fd)
    try:
        return int(json.loads(data.decode())["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None

