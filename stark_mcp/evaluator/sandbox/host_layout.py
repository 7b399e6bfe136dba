"""Which GPU device nodes and which CPU cores each GPU worker's processes get on this host.

GPUs are numbered as CUDA numbers them with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (the order of the bus
ids under ``/proc/driver/nvidia/gpus``). A sandboxed runner sees only its own GPU's device node, so
inside the jail the driver finds one GPU whatever its host index: the jail names it by UUID, which
means the same GPU however the driver numbers what it can open. On a host that pins, GPU ``i``'s
worker spins on core ``3i``, its baseline runner on ``3i+1`` and its candidate runners on ``3i+2``;
builders and spare runners run on the cores after every GPU's three. Standard library only.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

NVIDIA_PROC = "/proc/driver/nvidia/gpus"
COMMON_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")  # under /dev
TIMING_CORES_PER_GPU = 3  # the worker, the baseline runner, the candidate runner
MIN_SPARE_CORES = 5  # fewer than this left for builds and spares: pin nothing


class GpuLayoutError(RuntimeError):
    """A GPU index that this host does not have."""


@dataclass(frozen=True)
class HostGpu:
    bus: str  # PCI bus id, lower case
    minor: int  # N of /dev/nvidiaN
    uuid: str | None  # "GPU-..." as CUDA_VISIBLE_DEVICES accepts it


def host_gpus(base: str = NVIDIA_PROC) -> tuple[HostGpu, ...]:
    """The host's NVIDIA GPUs in PCI bus order; empty where the driver's /proc files cannot be read.
    Read once per process: every jail start and every pinning decision asks, and GPUs do not come
    and go under a running worker."""
    return _read_host_gpus(base)


@functools.lru_cache(maxsize=8)
def _read_host_gpus(base: str) -> tuple[HostGpu, ...]:
    gpus = []
    try:
        for bus in sorted(os.listdir(base), key=str.lower):
            minor, uuid = None, None
            with open(os.path.join(base, bus, "information")) as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    if key.strip() == "Device Minor":
                        minor = int(value)
                    elif key.strip() == "GPU UUID":
                        uuid = value.strip() or None
            if minor is not None:
                gpus.append(HostGpu(bus.lower(), minor, uuid))
    except (OSError, ValueError):
        return ()
    return tuple(gpus)


def gpu_device_nodes(index: int, base: str = NVIDIA_PROC, dev: str = "/dev") -> list[str]:
    """The /dev/nvidia* nodes a process needs for GPU ``index`` only."""
    gpus = host_gpus(base)
    if gpus and index >= len(gpus):
        raise GpuLayoutError(f"GPU {index} does not exist here ({len(gpus)} found)")
    own = f"{dev}/nvidia{gpus[index].minor if gpus else index}"
    return [p for p in [*(f"{dev}/{name}" for name in COMMON_NODES), own] if os.path.exists(p)]


def jail_visible_devices(index: int, base: str = NVIDIA_PROC) -> str:
    """``CUDA_VISIBLE_DEVICES`` inside a jail that holds only GPU ``index``'s node.

    The host index would be wrong there: the driver numbers only the GPUs it can open, so GPU 1 alone
    is the jail's device 0, and "1" finds no device at all. The UUID is right under any numbering;
    without one (no /proc files), the only device the jail can open is its device 0."""
    gpus = host_gpus(base)
    if index < len(gpus) and gpus[index].uuid:
        return str(gpus[index].uuid)
    return "0"


def _gpu_count(base: str) -> int:
    return max(len(host_gpus(base)), 1)


def pins(cores: int | None = None, base: str = NVIDIA_PROC) -> bool:
    """Whether this host pins GPU workers and runners: enough cores for every GPU's three and spares."""
    count = cores if cores is not None else (os.cpu_count() or 1)
    return count >= TIMING_CORES_PER_GPU * _gpu_count(base) + MIN_SPARE_CORES


def timing_cores(index: int, cores: int | None = None, base: str = NVIDIA_PROC) -> list[int] | None:
    """GPU ``index``'s worker, baseline-runner and candidate-runner cores, or None where nothing is pinned."""
    if not pins(cores, base) or index >= _gpu_count(base):
        return None
    first = TIMING_CORES_PER_GPU * index
    return list(range(first, first + TIMING_CORES_PER_GPU))


def spare_cores(cores: int | None = None, base: str = NVIDIA_PROC) -> list[int]:
    """Cores off every GPU's timing cores: where builders and spare runners start beside timing loops.
    Empty on a host that does not pin."""
    count = cores if cores is not None else (os.cpu_count() or 1)
    if not pins(count, base):
        return []
    return list(range(TIMING_CORES_PER_GPU * _gpu_count(base), count))
