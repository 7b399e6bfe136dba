"""GPU memory shared between processes through CUDA's virtual memory API and POSIX file descriptors.

Legacy CUDA IPC handles (``cudaIpcGetMemHandle``, what ``torch.multiprocessing`` uses) cannot cross PID
namespaces, and every candidate runs in its own. A ``cuMemCreate`` allocation exported as a file
descriptor can: the descriptor is inherited by the sandboxed process, which imports and maps it.

Standard library (ctypes) and torch only: this module runs in trusted workers and sandboxed runners.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

import torch

_HANDLE_POSIX_FD = 0x1
_ALLOCATION_PINNED = 0x1
_LOCATION_DEVICE = 0x1
_ACCESS_READWRITE = 0x3
_GRANULARITY_MINIMUM = 0x0


class CudaDriverError(RuntimeError):
    """A driver call failed; the message names the call and CUDA's error string."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_lib: Any = None


def _driver() -> Any:
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("cuda") or "libcuda.so.1"
        try:
            _lib = ctypes.CDLL(name)
        except OSError as exc:
            raise CudaDriverError(f"cannot load the CUDA driver library ({name}): {exc}") from None
        _check(_lib.cuInit(ctypes.c_uint(0)), "cuInit")
    return _lib


def _check(code: int, call: str) -> None:
    if code == 0:
        return
    text = ctypes.c_char_p()
    try:
        _lib.cuGetErrorString(code, ctypes.byref(text))
    except Exception:  # noqa: BLE001 - only for the message
        pass
    detail = text.value.decode() if text.value else f"error {code}"
    raise CudaDriverError(f"{call} failed: {detail}")


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = _ALLOCATION_PINNED
    prop.requestedHandleTypes = _HANDLE_POSIX_FD
    prop.location = _Location(_LOCATION_DEVICE, device)
    return prop


def granularity(device: int) -> int:
    lib = _driver()
    size = ctypes.c_size_t()
    prop = _prop(device)
    _check(
        lib.cuMemGetAllocationGranularity(ctypes.byref(size), ctypes.byref(prop), _GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity",
    )
    return int(size.value)


def round_up(nbytes: int, device: int) -> int:
    g = granularity(device)
    return max(g, (nbytes + g - 1) // g * g)


class _Allocation:
    """Physical memory and this process's mapping of it, unmapped and released when the last object
    holding it dies: the wrapper below, hence every tensor viewing the memory."""

    def __init__(self, handle: int, ptr: int, size: int, device: int) -> None:
        self.handle, self.ptr, self.size, self.device = handle, ptr, size, device

    def release(self) -> None:
        if self.ptr == 0:
            return
        ptr, self.ptr = self.ptr, 0
        try:
            torch.cuda.synchronize(self.device)  # kernels still queued may read or write it
        except Exception:  # noqa: BLE001 - at interpreter exit the runtime may be gone; free anyway
            pass
        lib = _driver()
        lib.cuMemUnmap(ctypes.c_ulonglong(ptr), ctypes.c_size_t(self.size))
        lib.cuMemAddressFree(ctypes.c_ulonglong(ptr), ctypes.c_size_t(self.size))
        lib.cuMemRelease(ctypes.c_ulonglong(self.handle))

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - a finalizer must not raise
            pass


class _CAI:
    """Just enough of ``__cuda_array_interface__`` for ``torch.as_tensor`` to wrap a raw pointer.
    torch keeps this object for as long as the tensor's storage lives, so it holds the allocation:
    no view can outlive the memory it reads."""

    def __init__(self, allocation: _Allocation) -> None:
        self.allocation = allocation
        self.__cuda_array_interface__ = {
            "shape": (allocation.size,),
            "typestr": "|u1",
            "data": (allocation.ptr, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }


class DeviceMapping:
    """One shared allocation mapped into this process: ``tensor`` is a flat uint8 view of it."""

    def __init__(self, handle: int, ptr: int, size: int, device: int) -> None:
        self.size, self.device = size, device
        self.tensor = torch.as_tensor(_CAI(_Allocation(handle, ptr, size, device)), device=f"cuda:{device}")

    @classmethod
    def create(cls, nbytes: int, device: int) -> tuple[DeviceMapping, int]:
        """Allocate ``nbytes`` (rounded up) on ``device`` and return the mapping and an exported fd."""
        lib = _driver()
        size = round_up(nbytes, device)
        handle = ctypes.c_ulonglong()
        prop = _prop(device)
        _check(
            lib.cuMemCreate(
                ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_ulonglong(0)
            ),
            "cuMemCreate",
        )
        fd = ctypes.c_int(-1)
        _check(
            lib.cuMemExportToShareableHandle(
                ctypes.byref(fd), handle, _HANDLE_POSIX_FD, ctypes.c_ulonglong(0)
            ),
            "cuMemExportToShareableHandle",
        )
        return cls._map(handle.value, size, device), int(fd.value)

    @classmethod
    def import_fd(cls, fd: int, size: int, device: int) -> DeviceMapping:
        """Map an allocation another process exported as ``fd`` (``size`` as the exporter gave it)."""
        lib = _driver()
        handle = ctypes.c_ulonglong()
        _check(
            lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _HANDLE_POSIX_FD),
            "cuMemImportFromShareableHandle",
        )
        return cls._map(handle.value, size, device)

    @classmethod
    def _map(cls, handle: int, size: int, device: int) -> DeviceMapping:
        lib = _driver()
        ptr = ctypes.c_ulonglong()
        _check(
            lib.cuMemAddressReserve(
                ctypes.byref(ptr),
                ctypes.c_size_t(size),
                ctypes.c_size_t(0),
                ctypes.c_ulonglong(0),
                ctypes.c_ulonglong(0),
            ),
            "cuMemAddressReserve",
        )
        _check(
            lib.cuMemMap(
                ptr,
                ctypes.c_size_t(size),
                ctypes.c_size_t(0),
                ctypes.c_ulonglong(handle),
                ctypes.c_ulonglong(0),
            ),
            "cuMemMap",
        )
        access = _AccessDesc(_Location(_LOCATION_DEVICE, device), _ACCESS_READWRITE)
        _check(
            lib.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)),
            "cuMemSetAccess",
        )
        return cls(handle, int(ptr.value), size, device)

    def close(self) -> None:
        """Let go of the memory: it is unmapped and released at once unless a view of ``tensor`` still
        lives, then when the last one dies (a view of freed memory would fault the whole context)."""
        self.tensor = None  # type: ignore[assignment]
