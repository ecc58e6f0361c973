"""Exporting a candidate's outputs (and its inputs after the call) to the reference worker.

CUDA tensors are copied into one long-lived buffer (:class:`ExportArena`) and shared from there, over
CUDA IPC or as host copies (:mod:`kernelbench.evaluation.transport`); the reference rebuilds and
compares them. :class:`ExportCommands` is a mixin of :class:`~kernelbench.evaluation.worker.process.Worker`.
"""

from __future__ import annotations

from typing import Any

from kernelbench.evaluation import protocol


class ExportCommands:
    """Snapshots, exports and received exports (a mixin of Worker)."""

    def _shareable(self, t: Any) -> bool:
        return type(t) is self.torch.Tensor and t.device.type == "cuda" and t.numel() > 0

    def _snapshot(self, leaves: list, inputs: list) -> list:
        """Start an export: copies of the output leaves (CUDA ones in the arena, with room left for the
        inputs), other values as they are."""
        if self.is_cuda:
            self.arena.begin(self.arena.span([t for t in [*leaves, *inputs] if self._shareable(t)]))
        return [(self.arena.copy(t) if self._shareable(t) else t.detach().clone()) if type(t) is self.torch.Tensor
                else t for t in leaves]

    def _export(self, output: Any, inputs: list, staged: bool = False) -> tuple[dict, list]:
        """Describe outputs and inputs for the reference worker; CUDA tensors go through the arena.

        ``staged``: the outputs are already a ``_snapshot`` (taken when forward returned)."""
        if self.host_copy:
            self.transport.begin_host_copies()
        torch = self.torch
        tree, leaves = self.transport.flatten(output)
        in_tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        if not staged:
            leaves = self._snapshot(leaves, in_tensors)
        if self.is_cuda:
            in_tensors = [self.arena.copy(t) if self._shareable(t) else t for t in in_tensors]
        plain = [t if type(t) is torch.Tensor else torch.empty(0, device=self.device) for t in leaves]
        out_descs, out_blobs = self.transport.encode_tensors(plain, self.host_copy)
        in_descs, in_blobs = self.transport.encode_tensors([t if type(t) is torch.Tensor else torch.empty(0)
                                                            for t in in_tensors], self.host_copy)
        for d in in_descs:
            if "blob" in d:
                d["blob"] += len(out_blobs)
        self.exported = (plain, in_tensors, output, inputs)
        return {"tree": tree, "outputs": out_descs, "inputs": in_descs}, out_blobs + in_blobs

    def _received(self, cmd: protocol.Compare, blobs: list, extent: int = 0):
        """``extent``: how far into a host-copy file outputs and inputs reach together (one mapping for both)."""
        outs = self.transport.decode_tensors(cmd.outputs, blobs, self.device, extent)
        ins = self.transport.decode_tensors(cmd.inputs, blobs, self.device, extent)
        return outs, ins


class ExportArena:
    """One device buffer per candidate process that every exported tensor is copied into.

    Exports reach the reference worker over CUDA IPC, and PyTorch keeps a shared block allocated
    until the reader's release is seen and collected. Copies into one long-lived buffer bound what
    sharing can ever hold to one set of tensors, and a correctness trial allocates no snapshot of its
    own. (The H100 runs first blamed sharing for 8 GiB kept per trial; the cause was a reference cycle
    in ``transport.flatten``, fixed there. The arena is what those runs then measured.)
    """

    ALIGN = 256

    def __init__(self, torch_module: Any, device: Any):
        self.torch = torch_module
        self.device = device
        self.buf = None
        self.used = 0

    @classmethod
    def _aligned(cls, nbytes: int) -> int:
        return -(-nbytes // cls.ALIGN) * cls.ALIGN

    @classmethod
    def span(cls, tensors: list) -> int:
        return sum(cls._aligned(t.numel() * t.element_size()) for t in tensors)

    def begin(self, need_bytes: int) -> None:
        self.used = 0
        if self.buf is None or self.buf.numel() < need_bytes:
            self.buf = None
            self.buf = self.torch.empty(max(need_bytes, self.ALIGN), dtype=self.torch.uint8, device=self.device)

    def copy(self, t: Any) -> Any:
        """A copy of ``t`` inside the buffer (a fresh clone where the buffer has no room left)."""
        n = t.numel() * t.element_size()
        if self.buf is None or self.used + n > self.buf.numel() or n == 0:
            return t.detach().clone()
        view = self.buf[self.used:self.used + n].view(t.dtype).view(t.shape)
        view.copy_(t.detach())
        self.used += self._aligned(n)
        return view


def rebuild(tree: Any, leaves: list) -> Any:
    """Put snapshot leaves back into the output's structure (tuple/list nesting)."""
    t = tree.get("t") if isinstance(tree, dict) else None
    if t == "tensor":
        return leaves[tree["i"]]
    if t in ("tuple", "list"):
        items = [rebuild(x, leaves) for x in tree["items"]]
        return tuple(items) if t == "tuple" else items
    if t == "scalar":
        return tree.get("v")
    return _Opaque(tree.get("type", "?"))


class _Opaque:
    """Stands for an output value of an unsupported type; compares as that type."""

    def __init__(self, type_name: str):
        self.type_name = type_name


