"""cgroup v2 groups for sandboxes: kill everything in one write, freeze and thaw, cap processes.

Used only as root on a machine with a writable v2 hierarchy (pure v2, or the unified half of a
hybrid); everything here degrades to "not available" and the launcher falls back to signals.
Standard library only.
"""

from __future__ import annotations

import os
import time


class CGroup:
    """``<root>/stark-<pid>/<name>``: one sandbox's processes and everything they start."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def create(cls, root: str, name: str, pids_max: int | None = None) -> CGroup | None:
        parent = os.path.join(root, f"stark-{os.getpid()}")
        try:
            os.makedirs(parent, exist_ok=True)
            for controller in ("pids", "memory"):  # memory only for memory.events (OOM kills)
                _enable(root, controller)
                _enable(parent, controller)
            path = os.path.join(parent, name)
            os.mkdir(path)
        except OSError:
            return None
        group = cls(path)
        if pids_max is not None:
            group._write("pids.max", str(pids_max), required=False)
        return group

    @property
    def procs_file(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def _write(self, name: str, value: str, required: bool = True) -> bool:
        try:
            with open(os.path.join(self.path, name), "w") as fh:
                fh.write(value)
            return True
        except OSError:
            if required:
                raise
            return False

    def pids(self) -> list[int]:
        try:
            with open(self.procs_file) as fh:
                return [int(line) for line in fh if line.strip()]
        except OSError:
            return []

    def freeze(self, frozen: bool = True, timeout: float = 2.0) -> bool:
        """Stop (or resume) every process in the group; True once the kernel says it is done."""
        if not self._write("cgroup.freeze", "1" if frozen else "0", required=False):
            return False
        deadline = time.monotonic() + timeout
        want = f"frozen {1 if frozen else 0}"
        while time.monotonic() < deadline:
            try:
                with open(os.path.join(self.path, "cgroup.events")) as fh:
                    if want in fh.read():
                        return True
            except OSError:
                return False
            time.sleep(0.0005)
        return False

    def kill(self) -> None:
        """SIGKILL every process in the group (cgroup.kill), falling back to signalling each one."""
        if not self._write("cgroup.kill", "1", required=False):
            for pid in self.pids():
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass

    def cpu_ns(self) -> int | None:
        """CPU time used by every process of the group so far (cpu.stat is core in cgroup v2)."""
        try:
            with open(os.path.join(self.path, "cpu.stat")) as fh:
                for line in fh:
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) * 1000
        except (OSError, ValueError):
            pass
        return None

    def empty(self) -> bool:
        return not self.pids()

    def oom_killed(self) -> bool:
        """The kernel's OOM killer took a process of this group (memory.events, where it exists)."""
        try:
            with open(os.path.join(self.path, "memory.events")) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
        except (OSError, ValueError):
            pass
        return False

    def remove(self, timeout: float = 5.0) -> None:
        """Kill what is left and remove the group (rmdir waits until it is empty)."""
        deadline = time.monotonic() + timeout
        while True:
            self.kill()
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)


def remove_own(root: str) -> None:
    """Remove this process's parent group once its jails are closed (empty groups only)."""
    try:
        os.rmdir(os.path.join(root, f"stark-{os.getpid()}"))
    except OSError:
        pass


def sweep_stale(root: str) -> None:
    """Kill and remove the groups of stark processes that are gone (a killed worker leaves them)."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if not name.startswith("stark-") or not name[6:].isdigit():
            continue
        if os.path.exists(f"/proc/{name[6:]}"):
            continue
        parent = os.path.join(root, name)
        for child in os.listdir(parent) if os.path.isdir(parent) else []:
            path = os.path.join(parent, child)
            if os.path.isdir(path):
                CGroup(path).remove(timeout=2.0)
        try:
            os.rmdir(parent)
        except OSError:
            pass


def _enable(path: str, controller: str) -> None:
    try:
        with open(os.path.join(path, "cgroup.controllers")) as fh:
            if controller not in fh.read().split():
                return
        with open(os.path.join(path, "cgroup.subtree_control"), "w") as fh:
            fh.write(f"+{controller}")
    except OSError:
        pass
