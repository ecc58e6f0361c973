"""Moving tensors from a candidate process to the trusted reference worker, without pickle.

A candidate's outputs (and its inputs after the call, to check they are unchanged) are
described as JSON; their data travels as a CUDA IPC handle (GPU: no copy) or as raw bytes
(CPU, and GPU tensors of a sandboxed candidate: see :data:`HOST_COPY_ENV`). The receiving side validates every field and rebuilds plain ``torch.Tensor`` objects
itself, so a hostile sender can at worst make the comparison fail.
"""

from __future__ import annotations

import base64
import logging
import math
import mmap
import os
import stat
import warnings
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
)}


#: Set to "1" in a candidate worker's environment to send CUDA tensors as host copies. A sandboxed candidate
#: runs in a PID namespace of its own under a uid of its own, where the reference cannot open its CUDA IPC
#: handles (CUDA IPC needs one PID namespace, and the importer must be allowed to ptrace the exporter).
HOST_COPY_ENV = "KB_TRANSPORT_HOST_COPY"
#: Where a host-copying worker writes its tensors: its own /dev/shm (a folder of the host's that the parent
#: knows), so the data crosses no socket and is copied once on each side.
HOST_COPY_DIR = "/dev/shm"
#: The one file a worker's host copies live in, reused (and grown) from export to export.
HOST_ARENA = "kbx-arena"
_ALIGN = 4096
#: Where each host copy starts: on a multiple of this (the reader allows this much padding per tensor).
HOST_COPY_ALIGN = _ALIGN


class TransportError(Exception):
    """A tensor description that cannot be a real tensor of the claimed shape."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: Any) -> torch.dtype:
    if not isinstance(name, str) or name not in _DTYPES:
        raise TransportError(f"unsupported dtype {name!r}")
    return _DTYPES[name]


# ------------------------------------------------------------------ structure
def flatten(obj: Any) -> tuple[Any, list]:
    """Split a (nested) output into a JSON tree and its list of leaves (tensors).

    A module-level walker, not a nested recursive closure: a closure that calls itself is a reference
    cycle, and its leaves (gigabytes of outputs, every timed call) would live until the cyclic
    garbage collector happened to run; on the H100 that ran the candidate out of memory.
    """
    leaves: list = []
    return _walk(obj, leaves), leaves


def _walk(o: Any, leaves: list) -> Any:
    # Containers and numbers are read through their base types' own methods, never the output's: a subclass's
    # __iter__, __int__ or __float__ would run candidate code here, after a timed call's end event (untimed).
    if isinstance(o, torch.Tensor):
        leaves.append(o)
        return {"t": "tensor", "i": len(leaves) - 1, "cls": f"{type(o).__module__}.{type(o).__qualname__}"}
    if isinstance(o, (tuple, list)):
        items = tuple.__iter__(o) if isinstance(o, tuple) else list.__iter__(o)
        return {"t": type(o).__name__ if type(o) in (tuple, list) else "tuple", "items": [_walk(x, leaves) for x in items]}
    if isinstance(o, bool) or o is None:
        return {"t": "scalar", "v": o}
    if isinstance(o, (int, float)):
        v = float.__float__(o) if isinstance(o, float) else int.__int__(o)
        if isinstance(v, float) and not math.isfinite(v):
            return {"t": "scalar", "v": repr(v), "nonfinite": True}
        return {"t": "scalar", "v": v}
    return {"t": "other", "type": f"{type(o).__module__}.{type(o).__qualname__}"}


def describe_structure(tree: Any) -> str:
    if not isinstance(tree, dict):
        return "?"
    t = tree.get("t")
    if t == "tensor":
        return "Tensor"
    if t in ("tuple", "list"):
        inner = ", ".join(describe_structure(x) for x in tree.get("items", []))
        return f"{t}({inner})"
    if t == "scalar":
        return f"scalar {tree.get('v')!r}"
    return str(tree.get("type", t))


# ------------------------------------------------------------------ encode (either side)
def _inside(shared: Any, t: torch.Tensor) -> bool:
    """Whether ``t``'s bytes are one contiguous run inside the shared buffer (an arena copy is)."""
    start, n = t.data_ptr(), t.numel() * t.element_size()
    return t.is_contiguous() and shared.ptr <= start and start + n <= shared.ptr + shared.size


def encode_tensors(tensors: list[torch.Tensor], host_copy: bool = False, shared: Any = None) -> tuple[list[dict], list]:
    """Descriptions and data blobs; ``host_copy`` sends CUDA tensors' bytes too (still decoded onto the GPU).

    ``shared`` (a :class:`~kernelbench.evaluation.shared_memory.SharedBuffer`): CUDA tensors inside it are described
    by their place in it, and the buffer's descriptor travels with the message (see :func:`shared_size`)."""
    descs, blobs = [], []
    for t in tensors:
        d: dict[str, Any] = {
            "dtype": dtype_name(t.dtype), "shape": list(t.shape), "device": str(t.device),
        }
        if t.device.type == "cuda" and t.numel() > 0 and shared is not None and _inside(shared, t):
            d["shared"] = {"offset": t.data_ptr() - shared.ptr, "size": shared.size}
        elif t.device.type == "cuda" and t.numel() > 0 and host_copy:
            d["shm"], d["offset"] = HOST_ARENA, _host_arena().append(t)
        elif t.device.type == "cuda" and t.numel() > 0:
            storage = t.untyped_storage()
            (device, handle, size_bytes, offset_bytes, rc_handle, rc_offset, ev_handle, ev_sync) = storage._share_cuda_()
            d["ipc"] = {
                "device": int(device), "handle": base64.b64encode(handle).decode(), "size_bytes": int(size_bytes),
                "offset_bytes": int(offset_bytes), "ref_counter_handle": base64.b64encode(rc_handle).decode(),
                "ref_counter_offset": int(rc_offset),
                "event_handle": base64.b64encode(ev_handle).decode() if ev_handle else None,
                "event_sync_required": bool(ev_sync),
            }
            d["stride"] = list(t.stride())
            d["storage_offset"] = int(t.storage_offset())
        else:  # CPU tensors, empty CUDA tensors (nothing to share over IPC), and host copies
            flat = t.detach().contiguous().reshape(-1)
            # A memoryview of the host copy: no second copy into a bytes object (outputs reach gigabytes).
            data = memoryview(flat.view(torch.uint8).cpu().numpy()) if flat.numel() else b""
            d["blob"] = len(blobs)
            blobs.append(data)
        descs.append(d)
    return descs, blobs


class HostArena:
    """A worker's host-copy file, mapped once and page-locked for the GPU, so that a gigabyte of outputs
    costs one DMA copy instead of page faults on a fresh file and a pageable copy every trial."""

    def __init__(self, path: str):
        self.path = path
        self.size = 0
        self.used = 0
        self._fd: int | None = None
        self._mm: mmap.mmap | None = None
        self._buf: torch.Tensor | None = None
        self._pinned = False

    def reset(self) -> None:
        """Start a new export (the reference has read the last one)."""
        self.used = 0

    def append(self, t: torch.Tensor) -> int:
        flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
        start = -(-self.used // _ALIGN) * _ALIGN
        self._reserve(start + flat.numel())
        assert self._buf is not None
        self._buf[start:start + flat.numel()].copy_(flat)
        self.used = start + flat.numel()
        return start

    def _reserve(self, nbytes: int) -> None:
        if nbytes <= self.size:
            return
        self.close()
        size = max(nbytes, 2 * self.size, 1 << 20)
        size = -(-size // _ALIGN) * _ALIGN
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        os.ftruncate(self._fd, size)
        self._mm = mmap.mmap(self._fd, size)
        self._buf = torch.frombuffer(self._mm, dtype=torch.uint8)
        self.size = size
        if torch.cuda.is_available():  # page-locked: the GPU copies into it directly (else a staged copy)
            cudart = torch.cuda.cudart()
            self._pinned = int(cudart.cudaHostRegister(self._buf.data_ptr(), size, 0)) == 0
            if not self._pinned:  # e.g. a file system that cannot be page-locked: clear the sticky error
                cudart.cudaGetLastError()

    def close(self) -> None:
        if self._buf is not None and self._pinned:
            torch.cuda.cudart().cudaHostUnregister(self._buf.data_ptr())
        self._buf, self._pinned = None, False
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.size = 0


_arena: HostArena | None = None


def _host_arena() -> HostArena:
    global _arena
    if _arena is None:
        _arena = HostArena(os.path.join(HOST_COPY_DIR, HOST_ARENA))
    return _arena


def begin_host_copies() -> None:
    """Called by the worker before each export: its host copies start again at the arena's beginning."""
    if _arena is not None:
        _arena.reset()


#: cudaHostRegisterReadOnly: page-lock memory the GPU will only read (the reader maps the candidate's file read-only).
_REGISTER_READ_ONLY = 0x08


class HostCopyMapping:
    """The reading side of a candidate's host-copy file on a GPU: the part a comparison needs, mapped read-only once
    and page-locked, then reused for every trial while the file stays the same (path, owner, device, inode, size).

    Mapped afresh for every trial and copied as pageable memory, a host copy cost about 0.4 s per gigabyte per trial
    on the H100, which made correctness on official level 2 (outputs up to 2.2 GB) five times slower in the
    sandbox. Page-locked, a trial is one DMA from the file's pages, and no CPU access to the candidate's file
    remains that a truncation could turn into SIGBUS. Only ``length`` bytes (what the comparison's descriptions
    claim, which the reference bounds by its own outputs and inputs) are mapped and page-locked.
    """

    def __init__(self, fd: int, st: os.stat_result, length: int, device: torch.device, pin: bool = True,
                 path: str = ""):
        self.key = _mapping_key(path, st)
        self.length = length
        self._mm: mmap.mmap | None = mmap.mmap(fd, length, access=mmap.ACCESS_READ)
        with warnings.catch_warnings():  # read-only memory: only ever copied from, never written through
            warnings.simplefilter("ignore", UserWarning)
            self.buf: torch.Tensor | None = torch.frombuffer(self._mm, dtype=torch.uint8)
        self.pinned = False
        if pin and device.type == "cuda" and torch.cuda.is_available():
            cudart = torch.cuda.cudart()
            self.pinned = int(cudart.cudaHostRegister(self.buf.data_ptr(), length, _REGISTER_READ_ONLY)) == 0
            if not self.pinned:  # clear the sticky error; the caller reads without the mapping
                cudart.cudaGetLastError()

    def read(self, offset: int, nbytes: int, device: torch.device) -> torch.Tensor:
        if self.buf is None or offset < 0 or offset + nbytes > self.length:
            raise TransportError("host copy outside its mapping")
        return self.buf[offset:offset + nbytes].to(device, copy=True)

    def close(self) -> None:
        if self.buf is not None and self.pinned:
            cudart = torch.cuda.cudart()
            if int(cudart.cudaHostUnregister(self.buf.data_ptr())) != 0:
                # Still registered: unmapping would let a later mapping at this address be read through stale
                # page-locked pages. Keep it mapped (a leak, never a wrong read) and page-lock nothing again.
                cudart.cudaGetLastError()
                _never_unmap.append((self._mm, self.buf))
                self.buf, self._mm, self.pinned = None, None, False
                return
        self.buf, self.pinned = None, False
        if self._mm is not None:
            self._mm.close()
            self._mm = None


_reading: HostCopyMapping | None = None
#: Mappings whose page-locking could not be undone, kept mapped for the process's life (after one, nothing is
#: page-locked again).
_never_unmap: list = []
_pin_refusal_logged = False


def _mapping_key(path: str, st: os.stat_result) -> tuple:
    """Which file a mapping is of: the worker's own folder (a fresh random name per worker, made by the parent),
    the owner, and the file's device, inode and size (an arena that grows is mapped again)."""
    return (path, st.st_uid, st.st_dev, st.st_ino, st.st_size)


def release_host_copy_mapping() -> None:
    """Let go of the last candidate's file (its last comparison is done, or a new problem starts)."""
    global _reading
    if _reading is not None:
        _reading.close()
        _reading = None


def kept_mapping(fd: int, st: os.stat_result, path: str, extent: int, device: torch.device,
                 pin: bool = True) -> HostCopyMapping | None:
    """The kept mapping of this file covering ``extent`` bytes, made (again) where needed; None where it cannot be
    page-locked (``pin``), so the caller copies the bytes itself."""
    global _reading, _pin_refusal_logged
    length = min(st.st_size, -(-extent // _ALIGN) * _ALIGN)
    if _reading is not None and _reading.key == _mapping_key(path, st) and _reading.length >= length:
        return _reading
    release_host_copy_mapping()
    if pin and _never_unmap:
        return None
    mapping = HostCopyMapping(fd, st, length, device, pin=pin, path=path)
    if pin and not mapping.pinned:
        mapping.close()
        if not _pin_refusal_logged:
            _pin_refusal_logged = True
            log.info("host copies: the driver would not page-lock a candidate's file (%d bytes); reading them into "
                     "memory instead (slower)", length)
        return None
    _reading = mapping
    return mapping


def _pread(fd: int, offset: int, nbytes: int) -> torch.Tensor:
    """The bytes read into the reference's own memory (a file that shrinks meanwhile gives an error, not SIGBUS)."""
    out = torch.empty(nbytes, dtype=torch.uint8)
    view = memoryview(out.numpy())
    done = 0
    while done < nbytes:
        n = os.preadv(fd, [view[done:]], offset + done)
        if n <= 0:
            raise TransportError(f"host copy ended after {offset + done} bytes while it was read")
        done += n
    return out


def _read_host_copy(spec: Any, offset: Any, nbytes: int, device: torch.device, extent: int = 0) -> torch.Tensor:
    """Bytes of a host copy the parent vouched for: a regular file (never a link) of the worker's uid.

    Checked on every read (owner, type, size). On a GPU they are copied from the kept, page-locked mapping of the
    file's first ``extent`` bytes (at least this tensor's end); elsewhere, or where the driver will not page-lock
    it, read into the reference's own memory."""
    if not isinstance(spec, dict) or not isinstance(spec.get("path"), str) or not isinstance(spec.get("uid"), int):
        raise TransportError("bad host copy")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise TransportError("bad host copy offset")
    try:  # O_NONBLOCK: a FIFO in the file's place must not hang the reference
        fd = os.open(spec["path"], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise TransportError(f"host copy cannot be opened ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != spec["uid"]:
            raise TransportError("host copy is not a regular file of the candidate's")
        if nbytes <= 0:
            raise TransportError("an empty tensor has no host copy")
        if offset + nbytes > st.st_size:
            raise TransportError(f"host copy holds {st.st_size} bytes, the tensor needs {offset + nbytes}")
        if device.type == "cuda" and torch.cuda.is_available():
            mapping = kept_mapping(fd, st, spec["path"], max(extent, offset + nbytes), device)
            if mapping is not None:
                return mapping.read(offset, nbytes, device)
        return _pread(fd, offset, nbytes).to(device)
    finally:
        os.close(fd)


def _described_bytes(d: Any) -> int:
    """The bytes a tensor description claims (its dtype and shape checked)."""
    if not isinstance(d, dict):
        raise TransportError("tensor description must be an object")
    dtype = parse_dtype(d.get("dtype"))
    return math.prod(_int_list(d.get("shape"), "shape")) * torch.empty((), dtype=dtype).element_size()


def claimed_bytes(descs: Any) -> int:
    """How many bytes a list of tensor descriptions claims, checked before anything is read: a comparison can only
    pass when they are the reference's own shapes and dtypes, so the reference refuses larger claims unread."""
    if not isinstance(descs, list):
        raise TransportError("tensor descriptions must be a list")
    return sum(_described_bytes(d) for d in descs)


def host_copy_extent(descs: list) -> int:
    """The end of the furthest host copy the descriptions name (their offsets are the candidate's claim)."""
    return max((d["offset"] + _described_bytes(d) for d in descs
                if isinstance(d, dict) and "host_file" in d and isinstance(d.get("offset"), int) and d["offset"] >= 0),
               default=0)


def names_shared(descs: list) -> bool:
    """Whether any description places its tensor in a shared buffer (then one descriptor travels with them)."""
    return any(isinstance(d, dict) and "shared" in d for d in descs)


def shared_size(descs: list) -> int:
    """The size of the shared buffer the descriptions are in (0: none); every one must name the same."""
    sizes = {d["shared"].get("size") if isinstance(d["shared"], dict) else None
             for d in descs if isinstance(d, dict) and "shared" in d}
    if not sizes:
        return 0
    size = sizes.pop()
    if sizes or not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise TransportError("the shared tensors must all name one buffer of a positive size")
    return size


def open_shared(fd: int, size: int, device: torch.device) -> Any:
    """The reference's mapping of a candidate's shared buffer (an ImportedBuffer); TransportError if it cannot."""
    from kernelbench.evaluation.shared_memory import ImportedBuffer, SharedMemoryError

    if device.type != "cuda":
        raise TransportError("shared buffers are CUDA memory, on a CUDA evaluation")
    try:
        return ImportedBuffer(fd, size, device.index if device.index is not None else torch.cuda.current_device())
    except SharedMemoryError as e:
        raise TransportError(f"the shared buffer cannot be mapped: {e}") from None


# ------------------------------------------------------------------ decode (trusted side)
def _int_list(v: Any, what: str) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise TransportError(f"bad {what}: {v!r}")
    if any(x < 0 for x in v):
        raise TransportError(f"negative {what}: {v!r}")
    return v


def _b64(v: Any, what: str) -> bytes:
    if not isinstance(v, str):
        raise TransportError(f"bad {what}")
    try:
        return base64.b64decode(v, validate=True)
    except ValueError:
        raise TransportError(f"bad {what}") from None


@dataclass
class Received:
    """Decoded tensors; keep this object alive while the tensors are in use (IPC mappings)."""

    tensors: list[torch.Tensor]


def decode_tensors(descs: Any, blobs: list, expect_device: torch.device, extent: int = 0,
                   shared: Any = None) -> Received:
    """Rebuild the described tensors. ``extent``: how far into a host-copy file this comparison reads in all (its
    outputs and inputs), so that the file is mapped once for both. ``shared``: the candidate's shared buffer, mapped
    (:func:`open_shared`); tensors in it are copied out, so that what is compared is the reference's own memory."""
    if not isinstance(descs, list):
        raise TransportError("tensor descriptions must be a list")
    out = []
    for d in descs:
        if not isinstance(d, dict):
            raise TransportError("tensor description must be an object")
        dtype = parse_dtype(d.get("dtype"))
        shape = _int_list(d.get("shape"), "shape")
        numel = math.prod(shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        if "shared" in d:
            t = _from_shared(d, dtype, shape, numel, itemsize, expect_device, shared)
        elif "ipc" in d:
            t = _from_ipc(d, dtype, shape, numel, itemsize, expect_device)
        elif "host_file" in d:
            t = _from_host_copy(d, dtype, shape, numel, itemsize, expect_device, extent)
        else:
            t = _from_blob(d, blobs, dtype, shape, numel, itemsize, expect_device)
        out.append(t)
    return Received(out)


def _from_ipc(d: dict, dtype: torch.dtype, shape: list[int], numel: int, itemsize: int,
              expect_device: torch.device) -> torch.Tensor:
    """A CUDA tensor shared over CUDA IPC, its view checked against the storage it claims."""
    if expect_device.type != "cuda":
        raise TransportError("CUDA tensor received on a CPU evaluation")
    ipc = d["ipc"]
    if not isinstance(ipc, dict):
        raise TransportError("bad ipc block")
    stride = _int_list(d.get("stride"), "stride")
    if len(stride) != len(shape):
        raise TransportError("stride and shape differ in length")
    offset = d.get("storage_offset")
    size_bytes = ipc.get("size_bytes")
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
               for x in (offset, size_bytes, ipc.get("offset_bytes"), ipc.get("ref_counter_offset"),
                         ipc.get("device"))):
        raise TransportError("bad ipc integers")
    if ipc["device"] != (expect_device.index or 0):
        raise TransportError(f"tensor on cuda:{ipc['device']}, expected {expect_device}")
    needed = (offset + sum((s - 1) * st for s, st in zip(shape, stride)) + 1) if numel else 0
    if needed * itemsize > size_bytes:
        raise TransportError("tensor view exceeds its storage")
    ev = ipc.get("event_handle")
    storage = torch.UntypedStorage._new_shared_cuda(
        ipc["device"], _b64(ipc.get("handle"), "handle"), size_bytes, ipc["offset_bytes"],
        _b64(ipc.get("ref_counter_handle"), "ref counter handle"), ipc["ref_counter_offset"],
        _b64(ev, "event handle") if ev is not None else None, bool(ipc.get("event_sync_required")),
    )
    t = torch.empty(0, dtype=dtype, device=expect_device)
    t.set_(storage, offset, shape, stride)
    return t


def _from_shared(d: dict, dtype: torch.dtype, shape: list[int], numel: int, itemsize: int,
                 expect_device: torch.device, shared: Any) -> torch.Tensor:
    """A CUDA tensor in a sandboxed candidate's shared buffer, copied into the reference's own memory."""
    if shared is None:
        raise TransportError("a shared tensor without its buffer")
    if expect_device.type != "cuda" or numel == 0:
        raise TransportError("a shared tensor is a non-empty CUDA tensor, on a CUDA evaluation")
    place = d["shared"]
    if not isinstance(place, dict) or set(place) != {"offset", "size"}:
        raise TransportError("bad shared block")
    offset, size, nbytes = place["offset"], place["size"], numel * itemsize
    if not (isinstance(offset, int) and not isinstance(offset, bool) and 0 <= offset and offset % itemsize == 0):
        raise TransportError("bad shared offset")
    if size != shared.size or offset + nbytes > shared.size:
        raise TransportError(f"a shared tensor of {nbytes} bytes at {offset} lies outside its {shared.size}-byte buffer")
    own = torch.empty(nbytes, dtype=torch.uint8, device=expect_device)
    own.copy_(shared.tensor(torch, expect_device)[offset:offset + nbytes])
    return own.view(dtype).reshape(shape)


def _from_host_copy(d: dict, dtype: torch.dtype, shape: list[int], numel: int, itemsize: int,
                    expect_device: torch.device, extent: int = 0) -> torch.Tensor:
    """A CUDA tensor a sandboxed candidate wrote to its /dev/shm folder (see :func:`_read_host_copy`)."""
    claimed = d.get("device")
    if not (isinstance(claimed, str) and claimed.startswith("cuda")) or expect_device.type != "cuda":
        raise TransportError("a host copy is of a CUDA tensor, on a CUDA evaluation")
    if numel == 0:
        raise TransportError("an empty tensor has no host copy")
    t = _read_host_copy(d["host_file"], d.get("offset"), numel * itemsize, expect_device, extent)
    t = t.view(dtype).reshape(shape)
    return t


def _from_blob(d: dict, blobs: list, dtype: torch.dtype, shape: list[int], numel: int, itemsize: int,
               expect_device: torch.device) -> torch.Tensor:
    """A tensor sent as bytes (CPU evaluations, and empty CUDA tensors)."""
    k = d.get("blob")
    if not isinstance(k, int) or not 0 <= k < len(blobs):
        raise TransportError("bad blob index")
    data = blobs[k]
    if len(data) != numel * itemsize:
        raise TransportError(f"blob holds {len(data)} bytes, shape needs {numel * itemsize}")
    if numel:
        buf = data if isinstance(data, bytearray) else bytearray(data)
        t = torch.frombuffer(buf, dtype=torch.uint8).view(dtype).reshape(shape)
    else:
        t = torch.empty(shape, dtype=dtype)
    claimed = d.get("device", "cpu")
    if isinstance(claimed, str) and claimed.startswith("cuda"):
        # An empty CUDA tensor travels as bytes; it stays a CUDA tensor. A tensor the candidate
        # left on the CPU stays there, so the device check sees it.
        if expect_device.type != "cuda":
            raise TransportError("CUDA tensor received on a CPU evaluation")
        t = t.to(expect_device)
    return t
