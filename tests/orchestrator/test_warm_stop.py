"""``daemon stop`` returns only once the daemon's process is gone, not merely its lock: a stand-in
daemon (a real process speaking the warm wire) lets its lifetime lock go and then lingers, as the
real one's interpreter teardown does on a loaded machine."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stark_mcp.orchestrator import warm_client

LINGER_S = 1.5
DAEMON = f"""
import fcntl, json, os, socket, sys, time
sock_path, lock_path = sys.argv[1:3]
fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
listener = socket.socket(socket.AF_UNIX)
listener.bind(sock_path)
listener.listen(1)
print("ready", flush=True)
conn, _ = listener.accept()
conn.makefile("rb").readline()
conn.sendall((json.dumps({{"op": "stopping", "pid": os.getpid()}}) + "\\n").encode())
conn.close()
os.close(fd)  # the lock is free...
time.sleep({LINGER_S})  # ...while the process is still alive
"""


def test_stop_waits_for_the_process_not_only_its_lock() -> None:
    folder = Path(tempfile.mkdtemp(prefix="stark-stop-", dir="/tmp"))  # a socket path must be short
    try:
        sock, lock = folder / "eval-x.sock", folder / "eval-x.lock"
        daemon = subprocess.Popen(
            [sys.executable, "-c", DAEMON, str(sock), str(lock)], stdout=subprocess.PIPE, text=True
        )
        assert daemon.stdout is not None and daemon.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        pid = asyncio.run(warm_client.stop(sock))
        waited = time.monotonic() - t0
        assert pid == daemon.pid
        assert daemon.poll() is not None, "stop returned while the daemon's process was still running"
        assert waited >= LINGER_S * 0.9
    finally:
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_pid_that_never_existed_or_has_exited_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert warm_client.process_gone(child.pid)
    assert not warm_client.process_gone(os.getpid())
