"""The process's zygote outlives the thread that asked for it. The zygote asks the kernel to kill it
when its parent dies (PR_SET_PDEATHSIG), and to the kernel the parent is the thread that started it:
started from an event loop's executor thread, it died (with every jail and worker forked from it)
when that loop ended, while the process went on sharing it (``process_zygote``). CI saw a later
evaluation in the same process fall back to bubblewrap ("the zygote did not become ready") and a
compile baseline's runner die with it."""

from __future__ import annotations

import os
import threading
import time

import pytest

from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.forked import READY_TIMEOUT_S, ZygoteClient

pytestmark = pytest.mark.slow


def test_a_zygote_started_from_a_thread_that_ends_lives_on() -> None:
    started: list[ZygoteClient] = []

    def start() -> None:
        client = ZygoteClient.start(scrub_env(os.environ, {}))
        started.append(client)
        # Ready means it has imported torch, long after it set its parent-death signal first thing.
        client.ready.wait(READY_TIMEOUT_S)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    (client,) = started
    try:
        assert client.ready.is_set() and not client.closed.is_set()
        time.sleep(1.0)  # the thread has ended: a signal tied to it has had its time
        assert client.proc is not None and client.proc.poll() is None, client.proc.returncode
        assert client.alive()
    finally:
        client.close()
