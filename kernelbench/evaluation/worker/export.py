"""Exporting a candidate's outputs (and its inputs after the call) to the reference worker.

CUDA tensors are copied into one long-lived buffer (:class:`ExportArena`) and shared from there, over
CUDA IPC or as host copies (:mod:`kernelbench.evaluation.transport`); the reference rebuilds and
compares them. :class:`ExportCommands` is a mixin of :class:`~kernelbench.evaluation.worker.process.Worker`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from kernelbench.evaluation import protocol
from kernelbench.evaluation.channel import Blobs

log = logging.getLogger(__name__)


class ExportCommands:
    """Snapshots, exports and received exports (a mixin of Worker)."""

    def _shareable(self, t: Any) -> bool:
        return type(t) is self.torch.Tensor and t.device.type == "cuda" and t.numel() > 0

    def _snapshot(self, leaves: list, inputs: list) -> list:
        """Start an export: copies of the output leaves (CUDA ones in the arena, with room left for the
        inputs), other values as they are."""
        # The last export was read (the parent releases it before the next command): its views into the arena
        # must not keep a smaller shared buffer alive while a larger one is made.
        self.exported = None
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
            # Every copy into the arena done before the reply says it is there. The reference reads a shared
            # buffer in another CUDA context, where nothing orders its copies after the ones queued on this
            # stream (CUDA IPC carries an event for that; host copies wait anyway). Without this wait the
            # reference read the input region of an 80 GB H100's multi-GB exports before the candidate's copy
            # had landed there: the previous export's inputs, and "input 0 was modified in place" for
            # identity candidates (official level 1, 25_Swish, 30_Softsign, 33_BatchNorm).
            self._sync()
        plain = [t if type(t) is torch.Tensor else torch.empty(0, device=self.device) for t in leaves]
        shared = self.arena.shared
        out_descs, out_blobs = self.transport.encode_tensors(plain, self.host_copy, shared)
        in_descs, in_blobs = self.transport.encode_tensors([t if type(t) is torch.Tensor else torch.empty(0)
                                                            for t in in_tensors], self.host_copy, shared)
        for d in in_descs:
            if "blob" in d:
                d["blob"] += len(out_blobs)
        self.exported = (plain, in_tensors, output, inputs)
        in_buffer = self.transport.names_shared([*out_descs, *in_descs])
        # The buffer's descriptor is the arena's: sent with the reply, never closed by it.
        return ({"tree": tree, "outputs": out_descs, "inputs": in_descs},
                Blobs(out_blobs + in_blobs, [shared.fd] if in_buffer else [], owned=False))

    def _received(self, cmd: protocol.Compare, blobs: list, extent: int = 0, size: int = 0):
        """``extent``: how far into a host-copy file outputs and inputs reach together (one mapping for both);
        ``size``: the shared buffer they name (0: none), both as the reference's claim check found them.

        Tensors in a sandboxed candidate's shared buffer are copied out of it here, and the buffer let go."""
        fds = blobs.take_fds() if isinstance(blobs, Blobs) else []
        shared = None
        try:
            if size:
                if len(fds) != 1:
                    raise self.transport.TransportError(f"shared tensors come with one descriptor, not {len(fds)}")
                shared = self.transport.open_shared(fds[0], size, self.device)
            outs = self.transport.decode_tensors(cmd.outputs, blobs, self.device, extent, shared)
            ins = self.transport.decode_tensors(cmd.inputs, blobs, self.device, extent, shared)
        finally:
            if shared is not None:
                # Copies out of the buffer are queued on the stream: done before it is unmapped, also when a later
                # description was refused after an earlier one's copy was queued.
                self._sync()
                shared.close()
            for fd in fds:
                os.close(fd)
        return outs, ins

    def cmd_share(self, cmd: protocol.Share, blobs: list) -> tuple[protocol.Reply, list]:
        """Export through a shared buffer from now on (or stop); with ``fill``, the probe the reference checks."""
        if not self.is_cuda:
            return protocol.ShareReply(shared=False, detail="a CPU worker shares no device memory", size=0), []
        why = self.arena.share(bool(cmd.enable))
        if why is not None:
            return protocol.ShareReply(shared=False, detail=why, size=0), []
        if not cmd.enable:
            return protocol.ShareReply(shared=False, detail="", size=0), []
        shared = self.arena.shared
        if cmd.fill is not None:
            self.arena.buf[:protocol.PROBE_BYTES].fill_(int(cmd.fill))
            self._sync()
        return (protocol.ShareReply(shared=True, detail="", size=shared.size),
                Blobs((), [shared.fd] if cmd.fill is not None else [], owned=False))

    def cmd_check_shared(self, cmd: protocol.CheckShared, blobs: list) -> tuple[protocol.Reply, list]:
        """Reference: map the probe buffer that came with the command and check what it holds."""
        fds = blobs.take_fds() if isinstance(blobs, Blobs) else []
        try:
            if len(fds) != 1:
                return protocol.ShareReply(shared=False, detail=f"one descriptor expected, {len(fds)} came", size=0), []
            shared = self.transport.open_shared(fds[0], int(cmd.size), self.device)
            try:
                head = shared.tensor(self.torch, self.device)[:protocol.PROBE_BYTES].clone()
            finally:
                self._sync()
                shared.close()
            ok = bool((head == int(cmd.fill)).all())
            return protocol.ShareReply(shared=ok, detail="" if ok else "the shared buffer does not hold what was written",
                                       size=shared.size), []
        except Exception as e:  # a probe: whatever fails means host copies, never a broken reference
            return protocol.ShareReply(shared=False, detail=f"{type(e).__name__}: {e}", size=0), []
        finally:
            for fd in fds:
                os.close(fd)


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
        #: The buffer is shared by descriptor (a sandboxed candidate; see :meth:`share`).
        self.sharing = False
        self.shared: Any = None  # its SharedBuffer

    def release(self) -> None:
        """Let go of the buffer (a shared one is unmapped and freed once no export's tensors hold it); the next
        :meth:`begin` makes a new one, shared again if this arena shares. Exports are few and far apart in an
        evaluation (a trial's outputs, then only the last timed call's), and the buffer is as large as the
        outputs and inputs together: 12-16 GiB for official level-1 problems, held through the timing stage and
        the launch trace for nothing, ran the H100's candidates out of memory in the profiled run."""
        self.buf, self.shared, self.used = None, None, 0

    def share(self, enable: bool) -> str | None:
        """Make the buffer one shared by descriptor (or an ordinary one again); why not, when that fails."""
        self.buf, self.shared, self.sharing, self.used = None, None, False, 0
        if not enable:
            return None
        try:
            self._new_shared(1)
        except Exception as e:  # SharedMemoryError, or a driver too old for it: host copies, as before
            return f"{type(e).__name__}: {e}"
        self.sharing = True
        return None

    def _new_shared(self, nbytes: int) -> None:
        from kernelbench.evaluation.shared_memory import SharedBuffer

        index = self.device.index if self.device.index is not None else self.torch.cuda.current_device()
        # A former buffer lives on while tensors over it do (they hold it), then is unmapped and freed.
        self.shared = SharedBuffer(nbytes, index)
        self.buf = self.shared.tensor(self.torch, self.device)

    @classmethod
    def _aligned(cls, nbytes: int) -> int:
        return -(-nbytes // cls.ALIGN) * cls.ALIGN

    @classmethod
    def span(cls, tensors: list) -> int:
        return sum(cls._aligned(t.numel() * t.element_size()) for t in tensors)

    def begin(self, need_bytes: int) -> None:
        self.used = 0
        if self.buf is None or self.buf.numel() < need_bytes:
            self.buf, self.shared = None, None
            if self.sharing:
                if self.device.type == "cuda":
                    # A shared buffer is the driver's memory, not the caching allocator's: blocks PyTorch keeps cached
                    # (a forward's temporaries, the last trial's tensors) cannot become it. Given back first.
                    self.torch.cuda.empty_cache()
                try:
                    self._new_shared(max(need_bytes, self.ALIGN))
                    return
                except Exception as e:  # out of device memory, say: host copies from here on
                    log.warning("no shared export buffer of %d bytes (%s): host copies instead", need_bytes, e)
                    self.sharing = False
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


