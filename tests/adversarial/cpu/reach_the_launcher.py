"""Looks for the process that started its runner (the zygote that forks runners, or bubblewrap) and
for a way to make it start another process outside this jail: any inherited socket is spoken to in
the zygote's own protocol, asking for a jail as root with the host writable; every process it can
see, its init included, is read, traced and signalled. Any success is reported by failing loudly;
the forward itself is honest.

Class: the launcher is reachable
Problem: scaled_add
Expect: passed
"""

import ctypes
import json
import os
import socket
import stat
import struct
import sys

import torch
import torch.nn as nn

REQUEST = {
    "module": "this",
    "args": [],
    "steps": [{"kind": "bind", "dest": "/", "src": "/", "perms": None, "size": None}],
    "env": {"PATH": "/usr/bin:/bin"},
    "uid": None,
    "cgroup_procs": None,
    "limits": {},
    "cpus": None,
    "chdir": "/",
    "fd_targets": [],
}


def _ask_every_socket(own: set[int]) -> list[str]:
    reached = []
    for fd in range(3, 1024):
        if fd in own:
            continue
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            sock.settimeout(2.0)
            socket.send_fds(sock, [b"J"], [1, 2])
            data = json.dumps(REQUEST).encode()
            sock.sendall(struct.pack(">I", len(data)) + data)
            answer = sock.recv(4096)
            if answer:
                reached.append(f"fd {fd} answered {answer[:80]!r}")
        except OSError:
            pass
        finally:
            sock.close()
    return reached


def _others() -> list[str]:
    reached = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        for name in ("environ", "mem"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as fh:
                    fh.read(1)
                reached.append(f"read /proc/{pid}/{name}")
            except OSError:
                pass
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/status") as fh:
                uid = next(line.split()[1] for line in fh if line.startswith("Uid:"))
            if uid != str(os.getuid()):
                reached.append(f"may signal pid {pid} of uid {uid}")
        except (OSError, StopIteration):
            pass
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
            reached.append(f"traced pid {pid}")
            libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    with open("/proc/self/status") as fh:
        caps = {line.split(":")[0]: line.split()[1] for line in fh if line.startswith("Cap")}
    if any(int(caps[k], 16) for k in ("CapEff", "CapPrm", "CapAmb")):
        reached.append(f"holds capabilities {caps}")
    return reached


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        own = {int(a) for a in sys.argv[1:] if a.isdigit()}  # the runner's own channel to its worker
        reached = _ask_every_socket(own) + _others()
        if reached:
            raise RuntimeError("reached outside the jail: " + "; ".join(reached))

    def forward(self, a, b):
        return torch.relu(a * self.scale + b)
