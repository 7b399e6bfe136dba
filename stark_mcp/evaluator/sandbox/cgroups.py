"""cgroup v2 groups for sandboxes: kill everything in one write, freeze and thaw, cap processes and
memory.

Used only as root on a machine with a writable v2 hierarchy (pure v2, or the unified half of a
hybrid); everything here degrades to "not available" and the launcher falls back to signals.
A jail's memory cap is ``memory.max`` of its v2 group where the memory controller is delegated
there; on a hybrid machine whose memory controller is mounted as cgroup v1, a v1 memory group under
our own v1 group (``memory.limit_in_bytes``) holds the same processes instead. Both charge what the
jail's processes touch in tmpfs and shared memory files, not only their resident sets.

Every evaluator's groups are under ``stark-<pid>-<start time>``: the owner named with its start
time, so that the groups of a dead evaluator (and only those) are told apart from a live one's,
even after its pid is reused. Standard library only.
"""

from __future__ import annotations

import os
import time

from stark_mcp.evaluator.sandbox.claims import Claim, ClaimError, alive, start_time


def own_parent_name() -> str:
    """This process's folder of groups in every hierarchy: ``stark-<pid>-<start time>``."""
    return f"stark-{os.getpid()}-{start_time(os.getpid())}"


_held: dict[str, Claim] = {}


def _claim_parent() -> None:
    """Hold the machine-wide claim on our folder's name for as long as this process lives (the kernel
    lets it go when we die): an evaluator in another PID namespace that sees the same cgroup tree,
    where our pid and start time could name a process of its own, then still leaves our groups alone."""
    name = own_parent_name()
    if name in _held:
        return
    try:
        got = Claim.take("cgroups", name)
    except (OSError, ClaimError):
        return
    if got is not None:
        got[0].record()
        _held[name] = got[0]


def _claimed_by_someone(name: str) -> bool:
    """Another live process holds the claim on the folder ``name`` (so it is not a leftover)."""
    try:
        got = Claim.take("cgroups", name)
    except (OSError, ClaimError):
        return False
    if got is None:
        return True
    try:
        os.unlink(got[0].path)  # its owner is gone for good: the name is never taken again
    except OSError:
        pass
    got[0].release(clean=True)
    return False


class CGroup:
    """``<root>/stark-<pid>-<start>/<name>``: one sandbox's processes and everything they start."""

    def __init__(self, path: str, root: str = "", memory_v1: str | None = None) -> None:
        self.path = path
        self.root = root or os.path.dirname(os.path.dirname(path))
        self.memory_v1 = memory_v1  # a v1 memory group holding the same processes (hybrid machines)
        self.memory_max: int | None = None  # the cap in force, where one could be set

    @classmethod
    def create(
        cls, root: str, name: str, pids_max: int | None = None, memory_max: int | None = None
    ) -> CGroup | None:
        _claim_parent()
        parent = os.path.join(root, own_parent_name())
        try:
            os.makedirs(parent, exist_ok=True)
            for controller in ("pids", "memory"):
                _enable(root, controller)
                _enable(parent, controller)
            path = os.path.join(parent, name)
            os.mkdir(path)
        except OSError:
            return None
        group = cls(path, root)
        if pids_max is not None:
            group._write("pids.max", str(pids_max), required=False)
        if memory_max is not None:
            group._cap_memory(name, memory_max)
        return group

    def _cap_memory(self, name: str, limit: int) -> None:
        if self._write("memory.max", str(limit), required=False):
            self._write("memory.swap.max", "0", required=False)  # the cap is not moved to swap
            self.memory_max = limit
            return
        v1 = v1_memory_root()
        if v1 is None:
            return
        parent = os.path.join(v1, own_parent_name())
        path = os.path.join(parent, name)
        try:
            os.makedirs(parent, exist_ok=True)
            os.mkdir(path)
            with open(os.path.join(path, "memory.limit_in_bytes"), "w") as fh:
                fh.write(str(limit))
        except OSError:
            _rmdir(path)
            return
        try:
            with open(os.path.join(path, "memory.memsw.limit_in_bytes"), "w") as fh:
                fh.write(str(limit))
        except OSError:
            pass  # no swap accounting: the cap covers memory only
        self.memory_v1, self.memory_max = path, limit

    @property
    def procs_file(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    @property
    def procs_files(self) -> list[str]:
        """Every group a jail's first process joins (its v2 group, and a v1 memory group)."""
        return [self.procs_file] + ([os.path.join(self.memory_v1, "cgroup.procs")] if self.memory_v1 else [])

    @property
    def dirs(self) -> list[str]:
        return [self.path] + ([self.memory_v1] if self.memory_v1 else [])

    def proc_paths(self) -> list[str]:
        """The groups as ``/proc/<pid>/cgroup`` names them (relative to each hierarchy's root)."""
        paths = ["/" + os.path.relpath(self.path, self.root)]
        if self.memory_v1:
            mount = _v1_memory_mount()
            if mount:
                paths.append("/" + os.path.relpath(self.memory_v1, mount))
        return paths

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
        """The kernel's OOM killer took a process of this group, or its memory cap was hit with
        nothing left to reclaim (v2 ``memory.events``; v1 ``memory.oom_control``)."""
        events = _counters(os.path.join(self.path, "memory.events"))
        if events.get("oom_kill", 0) > 0 or events.get("oom", 0) > 0:
            return True
        if self.memory_v1:
            control = _counters(os.path.join(self.memory_v1, "memory.oom_control"))
            if control.get("oom_kill", 0) > 0 or control.get("under_oom", 0) > 0:
                return True
        return False

    def remove(self, timeout: float = 5.0) -> None:
        """Kill what is left and remove the group (rmdir waits until it is empty)."""
        deadline = time.monotonic() + timeout
        while True:
            self.kill()
            try:
                os.rmdir(self.path)
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
        if self.memory_v1:
            _rmdir(self.memory_v1)


def _counters(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(path) as fh:
            for line in fh:
                key, _, value = line.strip().partition(" ")
                try:
                    out[key] = int(value)
                except ValueError:
                    continue
    except OSError:
        pass
    return out


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _v1_memory_mount() -> str | None:
    """Where a cgroup v1 hierarchy with the memory controller is mounted, if one is."""
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields = right.split()
                if len(fields) >= 3 and fields[0] == "cgroup" and "memory" in fields[2].split(","):
                    return left.split()[4]
    except OSError:
        pass
    return None


def v1_memory_root() -> str | None:
    """Our own group in a v1 memory hierarchy (where jail groups nest, so they count against every
    limit above us too), if there is one we may create groups in."""
    mount = _v1_memory_mount()
    if mount is None:
        return None
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                parts = line.strip().split(":", 2)
                if len(parts) == 3 and "memory" in parts[1].split(","):
                    path = os.path.join(mount, parts[2].lstrip("/"))
                    return path if os.access(path, os.W_OK) else None
    except OSError:
        pass
    return None


def hierarchies(root: str) -> list[str]:
    """The folders our jail groups live under: the v2 root, and the v1 memory group if one exists."""
    return [root] + ([v1] if (v1 := v1_memory_root()) is not None else [])


def remove_own(root: str) -> None:
    """Remove this process's parent groups once its jails are closed (empty groups only)."""
    for base in hierarchies(root):
        _rmdir(os.path.join(base, own_parent_name()))


def dead_owner(name: str) -> bool:
    """``name`` is ``stark-<pid>-<start time>`` of a process that no longer runs: its groups are
    leftovers that nothing alive owns. Any other name (another program's, a live evaluator's) is not."""
    parts = name.split("-")
    if len(parts) != 3 or parts[0] != "stark" or not parts[1].isdigit() or not parts[2].isdigit():
        return False
    return not alive(int(parts[1]), int(parts[2]))


def sweep_stale(root: str) -> None:
    """Kill and remove the groups of stark processes that are gone (a SIGKILLed evaluator leaves them):
    only those whose owner, named with its start time, provably no longer runs."""
    for base in hierarchies(root):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            parent = os.path.join(base, name)
            if not os.path.isdir(parent):
                continue
            if name.startswith("stark-") and name[6:].isdigit():
                # An older evaluator's, named without a start time: nothing proves its owner dead, so
                # once no process has its pid, only groups already empty go (rmdir refuses any other;
                # no process is signalled).
                if os.path.exists(f"/proc/{name[6:]}"):
                    continue
                for child in os.listdir(parent):
                    _rmdir(os.path.join(parent, child))
                _rmdir(parent)
                continue
            if not dead_owner(name) or _claimed_by_someone(name):
                continue
            for child in os.listdir(parent):
                path = os.path.join(parent, child)
                if os.path.isdir(path):
                    CGroup(path, base).remove(timeout=2.0)
            _rmdir(parent)


def _enable(path: str, controller: str) -> None:
    try:
        with open(os.path.join(path, "cgroup.controllers")) as fh:
            if controller not in fh.read().split():
                return
        with open(os.path.join(path, "cgroup.subtree_control"), "w") as fh:
            fh.write(f"+{controller}")
    except OSError:
        pass
