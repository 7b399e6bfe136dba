"""What a jail is made of (``JailSpec``, its ``Mount``s), where a mount appears to the jailed process,
and the error of a jail that cannot be started. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mount:
    src: str  # host path
    dest: str  # path inside the sandbox (under /tmp); at weaker levels the host path is used
    writable: bool = False


@dataclass
class JailSpec:
    argv: list[str]
    env: dict[str, str]
    name: str = "jail"
    mounts: list[Mount] = field(default_factory=list)
    gpu: int | None = None  # host CUDA index (PCI order) to expose; None: no GPU device at all
    cpus: list[int] | None = None  # CPU affinity of the jailed process
    scratch_bytes: int = 2 << 30
    max_processes: int = 512
    max_file_bytes: int = 1 << 30
    # What the jail's processes may hold in memory, shared memory and tmpfs files included (cgroup
    # memory.max); None: half the machine's memory (``default_memory_cap``).
    memory_max: int | None = None
    hidden: list[str] = field(default_factory=list)  # host dirs to hide (data, caches)
    visible: list[str] = field(default_factory=list)  # host dirs that must stay readable inside


class JailError(RuntimeError):
    """The jail could not be started (a missing tool, a broken bubblewrap)."""



def inside_path(level: str, mount: Mount) -> str:
    """Where a mount appears to the jailed process: its destination only inside a mount namespace."""
    return mount.dest if level == "sandbox" else mount.src
