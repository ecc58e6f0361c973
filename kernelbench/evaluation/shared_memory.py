"""Device memory one process shares with another by file descriptor (CUDA's virtual memory management API).

A sandboxed candidate runs in a PID namespace of its own under a uid of its own, where the reference cannot open
its CUDA IPC handles (legacy CUDA IPC needs one PID namespace and the right to ptrace the exporter). Memory made
with ``cuMemCreate`` and exported as a POSIX file descriptor needs neither: the descriptor itself is the right to
the memory, and it crosses the worker's Unix socket (``SCM_RIGHTS``) like any other. The candidate copies its
outputs into such a buffer (:class:`SharedBuffer`), the parent relays the descriptor, and the reference maps the
buffer (:class:`ImportedBuffer`) and copies what it compares into its own memory: a device-to-device copy instead
of a host copy on each side (docs/threat-model.md, "Outputs of a sandboxed candidate").

Only the driver API is used, through ctypes (torch exposes none of it); every call's status is checked, and any
failure is a :class:`SharedMemoryError`, so callers can fall back to host copies.
"""

from __future__ import annotations

import ctypes
import logging
import os
from typing import Any

log = logging.getLogger(__name__)

#: CUmemAllocationType: memory pinned on a device.
_ALLOCATION_PINNED = 1
#: CUmemAllocationHandleType: a POSIX file descriptor.
_HANDLE_POSIX_FD = 1
#: CUmemLocationType: a device.
_LOCATION_DEVICE = 1
#: CUmemAccess_flags: read and write.
_ACCESS_READ_WRITE = 3
#: CUmemAllocationGranularity_flags: the minimum granularity.
_GRANULARITY_MINIMUM = 0


class SharedMemoryError(RuntimeError):
    """The driver refused (or has not) what sharing by file descriptor needs."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_u64 = ctypes.c_uint64
_SIGNATURES: dict[str, list] = {
    "cuMemGetAllocationGranularity": [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_AllocationProp), ctypes.c_int],
    "cuMemCreate": [ctypes.POINTER(_u64), ctypes.c_size_t, ctypes.POINTER(_AllocationProp), ctypes.c_ulonglong],
    "cuMemRelease": [_u64],
    "cuMemAddressReserve": [ctypes.POINTER(_u64), ctypes.c_size_t, ctypes.c_size_t, _u64, ctypes.c_ulonglong],
    "cuMemAddressFree": [_u64, ctypes.c_size_t],
    "cuMemMap": [_u64, ctypes.c_size_t, ctypes.c_size_t, _u64, ctypes.c_ulonglong],
    "cuMemUnmap": [_u64, ctypes.c_size_t],
    "cuMemSetAccess": [_u64, ctypes.c_size_t, ctypes.POINTER(_AccessDesc), ctypes.c_size_t],
    "cuMemExportToShareableHandle": [ctypes.c_void_p, _u64, ctypes.c_int, ctypes.c_ulonglong],
    "cuMemImportFromShareableHandle": [ctypes.POINTER(_u64), ctypes.c_void_p, ctypes.c_int],
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
}
_driver: Any = None


def _lib() -> Any:
    """libcuda with the signatures above (loaded once; SharedMemoryError where there is no driver)."""
    global _driver
    if _driver is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise SharedMemoryError(f"no CUDA driver library: {e}") from None
        for name, argtypes in _SIGNATURES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise SharedMemoryError(f"the CUDA driver has no {name}") from None
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        _driver = lib
    return _driver


def _check(status: int, what: str) -> None:
    if status != 0:
        text = ctypes.c_char_p()
        try:
            _lib().cuGetErrorString(status, ctypes.byref(text))
        except Exception:
            pass
        detail = text.value.decode(errors="replace") if text.value else "unknown error"
        raise SharedMemoryError(f"{what} failed: CUDA driver error {status} ({detail})")


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = _ALLOCATION_PINNED
    prop.requestedHandleTypes = _HANDLE_POSIX_FD
    prop.location = _Location(_LOCATION_DEVICE, device)
    return prop


def granularity(device: int) -> int:
    """The size every shared buffer is a multiple of (2 MiB on the GPUs measured)."""
    g = ctypes.c_size_t()
    prop = _prop(device)
    _check(_lib().cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop), _GRANULARITY_MINIMUM),
           "cuMemGetAllocationGranularity")
    return int(g.value)


def _map(handle: int, size: int, device: int) -> int:
    """Reserve ``size`` bytes of addresses, map ``handle`` there, readable and writable by ``device``."""
    lib, ptr = _lib(), _u64()
    _check(lib.cuMemAddressReserve(ctypes.byref(ptr), size, 0, 0, 0), "cuMemAddressReserve")
    try:
        _check(lib.cuMemMap(ptr.value, size, 0, handle, 0), "cuMemMap")
        try:
            access = _AccessDesc(_Location(_LOCATION_DEVICE, device), _ACCESS_READ_WRITE)
            _check(lib.cuMemSetAccess(ptr.value, size, ctypes.byref(access), 1), "cuMemSetAccess")
        except SharedMemoryError:
            lib.cuMemUnmap(ptr.value, size)
            raise
    except SharedMemoryError:
        lib.cuMemAddressFree(ptr.value, size)
        raise
    return int(ptr.value)


def _unmap(ptr: int, size: int) -> None:
    lib = _lib()
    lib.cuMemUnmap(ptr, size)
    lib.cuMemAddressFree(ptr, size)


class _DeviceArray:
    """What ``torch.as_tensor`` wraps without a copy (the CUDA array interface); the tensor keeps it alive."""

    def __init__(self, owner: Any, ptr: int, size: int):
        self.owner = owner  # the buffer stays mapped while a tensor over it exists
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (ptr, False), "version": 2}


class _Mapped:
    """Addresses mapped onto shared memory, unmapped by :meth:`close` (idempotent)."""

    ptr: int = 0
    size: int = 0

    def tensor(self, torch: Any, device: Any) -> Any:
        """The whole buffer as a uint8 CUDA tensor (no copy; valid until :meth:`close`)."""
        if not self.ptr:
            raise SharedMemoryError("the buffer is closed")
        return torch.as_tensor(_DeviceArray(self, self.ptr, self.size), device=device)

    def _unmap(self) -> None:
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            _unmap(ptr, self.size)


class SharedBuffer(_Mapped):
    """A candidate's export buffer: device memory of ``size`` bytes (rounded up) with a descriptor to share it."""

    def __init__(self, size: int, device: int):
        self._handle, self.fd = 0, -1
        lib = _lib()
        g = granularity(device)
        self.size = max(g, -(-size // g) * g)
        self.device = device
        handle = _u64()
        _check(lib.cuMemCreate(ctypes.byref(handle), self.size, ctypes.byref(_prop(device)), 0), "cuMemCreate")
        self._handle = int(handle.value)
        try:
            self.ptr = _map(self._handle, self.size, device)
            fd = ctypes.c_int(-1)
            _check(lib.cuMemExportToShareableHandle(ctypes.byref(fd), self._handle, _HANDLE_POSIX_FD, 0),
                   "cuMemExportToShareableHandle")
            self.fd = int(fd.value)
            os.set_inheritable(self.fd, False)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._unmap()
        if self._handle:
            _lib().cuMemRelease(self._handle)
            self._handle = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # the last tensor over the buffer is gone (each holds it)
        try:
            self.close()
        except Exception:
            pass


class ImportedBuffer(_Mapped):
    """The reference's mapping of a buffer another process shared by descriptor.

    ``size`` is what the sender says; a lie makes the mapping fail (more than the buffer holds) or covers less of
    it than the sender describes (the reader checks every tensor against ``size``). The descriptor is not closed
    here: it belongs to the caller.
    """

    def __init__(self, fd: int, size: int, device: int):
        if not isinstance(fd, int) or fd < 0:
            raise SharedMemoryError("no descriptor for the shared buffer")
        g = granularity(device)
        if size <= 0 or size % g:
            raise SharedMemoryError(f"a shared buffer's size must be a positive multiple of {g} bytes, not {size}")
        lib, handle = _lib(), _u64()
        _check(lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _HANDLE_POSIX_FD),
               "cuMemImportFromShareableHandle")
        try:
            self.ptr = _map(int(handle.value), size, device)
            self.size = size
        finally:
            lib.cuMemRelease(int(handle.value))  # the mapping holds the memory from here on

    def close(self) -> None:
        self._unmap()
