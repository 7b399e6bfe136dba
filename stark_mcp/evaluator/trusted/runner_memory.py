"""Reading a runner's published CPU outputs straight from its memory, off the jail's clock.

The runner names where each output's bytes lie (an address, untrusted); the worker copies them into
its own region with ``pread`` on ``/proc/<pid>/mem``, only for the calls it checks. The file is opened
before any candidate code runs, from the pid the kernel gave with the runner's hello (SCM_CREDENTIALS),
and access to it is checked at open, so a candidate that later makes itself undumpable does not lose
us the reads. A bad address costs the candidate its verdict, never the worker anything: the kernel
answers a read of unmapped memory with an error. Where opening is refused (no ptrace rights, as in a
container without CAP_SYS_PTRACE whose runners run under their own uid), the runner copies its outputs
into the shared region itself, as on a GPU. Standard library only.
"""

from __future__ import annotations

import os
import socket
import struct

ADDRESS_LIMIT = 1 << 63  # an off_t: what pread can seek to


class OutputUnreadable(Exception):
    """The bytes a runner named could not be read where it said they were."""


def enable_credentials(sock: socket.socket) -> None:
    """Have the kernel attach the sender's pid (in our pid namespace) to what ``sock`` receives."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)


def sender_pid(sock: socket.socket) -> int | None:
    """Read one byte from ``sock`` (the runner's hello) and return the pid the kernel attached."""
    _data, ancillary, _flags, _addr = sock.recvmsg(1, socket.CMSG_SPACE(struct.calcsize("iII")))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid, _uid, _gid = struct.unpack("iII", payload[: struct.calcsize("iII")])
            return pid if pid > 0 else None
    return None


class RunnerMemory:
    """An open ``/proc/<pid>/mem`` of one runner."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, pid: int) -> RunnerMemory | None:
        """None where this process may not read that one's memory."""
        try:
            return cls(os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            return None

    def read_into(self, address: object, dest: memoryview) -> None:
        """Fill ``dest`` with the bytes at ``address`` in the runner, or raise OutputUnreadable."""
        if type(address) is not int or not 0 < address < ADDRESS_LIMIT - len(dest):
            raise OutputUnreadable(f"an output's address is not one: {str(address)[:40]}")
        done = 0
        while done < len(dest):
            try:
                got = os.preadv(self.fd, [dest[done:]], address + done)
            except OSError as exc:
                raise OutputUnreadable(
                    f"{len(dest)} bytes at {address:#x} in the candidate's process could not be read "
                    f"({exc.strerror})"
                ) from None
            if got <= 0:
                raise OutputUnreadable("the candidate's process ended while its outputs were read")
            done += got

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass
