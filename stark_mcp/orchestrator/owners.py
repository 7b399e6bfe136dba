"""Who drives a running run, and whether they still can: the process and session a run's
'running' status belongs to.

A run is claimed (``Store.claim_run``) when it starts running: by the process (session 'process')
for ``stark-mcp run`` and the headless loop, by the MCP session for a host's tools. A process is
known by its pid and its start time in clock ticks since boot (``/proc/PID/stat``), so a pid reused
by another process does not look alive; a session by an id of its own, alive while it is open in
this process. Owners on another host cannot be checked from here and are left alone.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from stark_mcp.records import RunOwner

PROCESS_SESSION = "process"
# The MCP sessions open in this process: their runs are driven while they stay open.
_open_sessions: set[str] = set()


def process_started(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat), '' where /proc is not, None if gone."""
    stat = Path(f"/proc/{pid}/stat")
    if not Path("/proc/self/stat").exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    try:
        text = stat.read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields follow its last ')'.
    return text.rsplit(")", 1)[1].split()[19]


def this_process(session: str = PROCESS_SESSION) -> RunOwner:
    return RunOwner(
        pid=os.getpid(), started=process_started(os.getpid()) or "", host=socket.gethostname(),
        session=session,
    )


def open_session() -> RunOwner:
    """A new MCP session of this process, alive until ``close_session``."""
    owner = this_process(f"mcp-{secrets.token_hex(8)}")
    _open_sessions.add(owner.session)
    return owner


def close_session(owner: RunOwner) -> None:
    _open_sessions.discard(owner.session)


def owner_alive(owner: RunOwner) -> bool | None:
    """True while the owner can still drive its run, False once it cannot, None when this host
    cannot tell (another host's process)."""
    if owner.host != socket.gethostname():
        return None
    if process_started(owner.pid) != owner.started:
        return False
    if owner.pid == os.getpid() and owner.session != PROCESS_SESSION:
        return owner.session in _open_sessions
    return True
