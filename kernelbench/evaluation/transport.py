"""Moving tensors from a candidate process to the trusted reference worker, without pickle.

A candidate's outputs (and its inputs after the call, to check they are unchanged) are
described as JSON; their data travels as a CUDA IPC handle (GPU: no copy) or as raw bytes
(CPU). The receiving side validates every field and rebuilds plain ``torch.Tensor`` objects
itself, so a hostile sender can at worst make the comparison fail.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any

import torch

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
)}


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
    if isinstance(o, torch.Tensor):
        leaves.append(o)
        return {"t": "tensor", "i": len(leaves) - 1, "cls": f"{type(o).__module__}.{type(o).__qualname__}"}
    if isinstance(o, (tuple, list)):
        return {"t": type(o).__name__ if type(o) in (tuple, list) else "tuple", "items": [_walk(x, leaves) for x in o]}
    if isinstance(o, bool) or o is None:
        return {"t": "scalar", "v": o}
    if isinstance(o, (int, float)):
        v = float(o) if isinstance(o, float) else int(o)
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
def encode_tensors(tensors: list[torch.Tensor]) -> tuple[list[dict], list[bytes]]:
    descs, blobs = [], []
    for t in tensors:
        d: dict[str, Any] = {
            "dtype": dtype_name(t.dtype), "shape": list(t.shape), "device": str(t.device),
        }
        if t.device.type == "cuda" and t.numel() > 0:
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
        else:  # CPU tensors, and empty CUDA tensors (nothing to share over IPC)
            flat = t.detach().contiguous().reshape(-1)
            data = flat.view(torch.uint8).cpu().numpy().tobytes() if flat.numel() else b""
            d["blob"] = len(blobs)
            blobs.append(data)
        descs.append(d)
    return descs, blobs


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


def decode_tensors(descs: Any, blobs: list, expect_device: torch.device) -> Received:
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
        if "ipc" in d:
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
        else:
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
        out.append(t)
    return Received(out)
