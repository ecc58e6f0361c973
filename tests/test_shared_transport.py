"""A sandboxed candidate's outputs through a device buffer shared by file descriptor: the parts that run without a
GPU. Descriptors cross the real channel (SCM_RIGHTS on a Unix socket pair) and none leaks, whatever a peer sends;
the parent relays shared descriptions only for a candidate whose buffer the reference has read; the reference
refuses a buffer no comparison can need, and closes every descriptor it was sent. The GPU half (a real shared
buffer read across the sandbox, outputs compared through it) is in tests/test_sandbox_gpu.py."""

from __future__ import annotations

import array
import json
import os
import socket
import struct

import pytest
import torch

from kernelbench.evaluation import protocol, transport
from kernelbench.evaluation.channel import MAX_FDS, Blobs, Channel, ProtocolError
from kernelbench.evaluation.parent import sharing, start_worker
from kernelbench.evaluation.seeds import INIT_SEED
from kernelbench.evaluation.worker.export import ExportArena
from kernelbench.evaluation.worker.process import CLAIM_FACTOR, CLAIM_SLACK, Worker


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield Channel(a), Channel(b)
    a.close()
    b.close()


def test_descriptors_travel_with_their_message_and_stay_the_senders(pair, tmp_path):
    sender, receiver = pair
    f = tmp_path / "buffer"
    f.write_bytes(b"shared")
    fd = os.open(f, os.O_RDONLY)
    try:
        sender.send({"reply": "x"}, Blobs([b"frame"], [fd], owned=False))
        msg, blobs = receiver.recv(timeout=5)
        assert msg == {"reply": "x"} and list(blobs) == [bytearray(b"frame")]
        (got,) = blobs.fds
        assert got != fd and os.fstat(got).st_ino == os.fstat(fd).st_ino  # the same file, a descriptor of our own
        assert os.pread(got, 6, 0) == b"shared"
        assert not _closed(fd), "a descriptor sent without ownership stays open"
        taken = blobs.take_fds()
        blobs.close_fds()
        assert not _closed(got), "a taken descriptor is the taker's"
        os.close(taken[0])
    finally:
        os.close(fd)


def test_descriptors_nobody_takes_are_closed(pair, tmp_path):
    sender, receiver = pair
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        sender.send({"a": 1}, Blobs([], [fd, fd], owned=False))
        _, blobs = receiver.recv(timeout=5)
        got = list(blobs.fds)
        assert len(got) == 2 and not any(_closed(g) for g in got)
        del blobs  # collected: closed
        assert all(_closed(g) for g in got)
    finally:
        os.close(fd)
    with pytest.raises(ValueError, match=f"at most {MAX_FDS}"):
        sender.send({"a": 1}, Blobs([], [0] * (MAX_FDS + 1), owned=False))


def _raw(sock: socket.socket, header: dict, fds: list[int], frames: list[bytes] = ()) -> None:
    body = json.dumps(header).encode()
    first = struct.pack(">Q", len(body)) + body
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = sock.sendmsg([first], anc)
    sock.sendall(first[sent:])
    for fr in frames:
        sock.sendall(struct.pack(">Q", len(fr)) + fr)


def test_a_hostile_peer_cannot_leak_descriptors_into_the_trusted_side(pair, tmp_path):
    sender, receiver = pair
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        before = _open_fds()
        # Descriptors the message does not announce: refused, and closed.
        _raw(sender.sock, {"_nblobs": 0}, [fd])
        with pytest.raises(ProtocolError, match="announces 0 descriptors and carries 1"):
            receiver.recv(timeout=5)
        assert _open_fds() == before
        # More than a message may carry: refused, none kept.
        _raw(sender.sock, {"_nblobs": 0, "_nfds": MAX_FDS + 3}, [fd] * (MAX_FDS + 3))
        with pytest.raises(ProtocolError):
            receiver.recv(timeout=5)
        assert _open_fds() == before
        # Descriptors sent with a later frame instead of the header: dropped by the kernel, never seen.
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with a, b:
            body = json.dumps({"_nblobs": 1}).encode()
            a.sendall(struct.pack(">Q", len(body)) + body)
            a.sendmsg([struct.pack(">Q", 3) + b"abc"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            before = _open_fds()
            msg, blobs = Channel(b).recv(timeout=5)
            assert list(blobs) == [bytearray(b"abc")] and blobs.fds == []
            del blobs
            assert _open_fds() == before
    finally:
        os.close(fd)


def test_the_parent_relays_shared_descriptions_only_for_a_checked_candidate():
    w = start_worker("candidate", "cpu", "torch", None, init=False)
    try:
        desc = {"dtype": "float32", "shape": [4], "device": "cuda:0", "shared": {"offset": 0, "size": 2 << 20}}
        with pytest.raises(ValueError, match="whose buffer the reference has read"):
            w.relay_outputs([desc])
        w.shares = True  # what parent/sharing.settle sets once the reference has read the probe
        assert w.relay_outputs([desc]) == [desc]
        for extra in ({"shm": "kbx-arena"}, {"ipc": {}}, {"blob": 0}):
            with pytest.raises(ValueError, match="one place for its data"):
                w.relay_outputs([{**desc, **extra}])
        with pytest.raises(ValueError, match="may not name a host file"):
            w.relay_outputs([{**desc, "host_file": {"path": "/etc/shadow", "uid": 0}}])
    finally:
        w.kill()


def test_a_shared_buffer_is_one_buffer_of_a_positive_size():
    one = {"dtype": "float32", "shape": [4], "shared": {"offset": 0, "size": 4096}}
    assert transport.shared_size([one, {"blob": 0}, one]) == 4096
    assert transport.shared_size([{"blob": 0}]) == 0
    for bad in ([one, {**one, "shared": {"offset": 0, "size": 8192}}], [{**one, "shared": {"offset": 0, "size": 0}}],
                [{**one, "shared": {"offset": 0, "size": True}}], [{**one, "shared": [1]}]):
        with pytest.raises(transport.TransportError, match="one buffer of a positive size"):
            transport.shared_size(bad)
    with pytest.raises(transport.TransportError, match="CUDA memory"):
        transport.open_shared(0, 4096, torch.device("cpu"))
    with pytest.raises(transport.TransportError, match="without its buffer"):
        transport.decode_tensors([one], [], torch.device("cuda:0"))


_CODE = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
         "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(64, 32)]\n\n"
         "def get_init_inputs():\n    return []\n")


def _reference() -> Worker:
    w = Worker("reference", "cpu")
    w.cmd_init(protocol.Init(), [])
    w.cmd_setup(protocol.Setup(code=_CODE, precision="fp32", atol=1e-4, rtol=1e-4, init_seed=INIT_SEED,
                               probe_seed=None, ieee_fp32=True, compile_mode=None), [])
    return w


def _compare(w: Worker, out_desc: dict, blobs: Blobs):
    w.cmd_run(protocol.Run(seed=1, fwd_seed=2, slot=0, poison=False), [])
    x, _ = w.slots["0"]
    ins, in_blobs = transport.encode_tensors(list(x))
    ins[0]["blob"] = len(blobs)
    blobs.extend(in_blobs)
    reply, _ = w.cmd_compare(protocol.Compare(slot=0, tree={"t": "tensor", "i": 0, "cls": "torch.Tensor"},
                                              outputs=[out_desc], inputs=ins), blobs)
    return reply


def test_the_reference_refuses_an_oversized_or_undescribed_buffer_and_closes_every_descriptor(tmp_path):
    w = _reference()
    desc = {"dtype": "float32", "shape": [64, 32], "device": "cuda:0", "shared": {"offset": 0, "size": 2 << 20}}
    fds = [os.open(tmp_path, os.O_RDONLY) for _ in range(2)]
    reply = _compare(w, desc, Blobs([], fds))
    assert not reply.passed and "one descriptor, not 2" in reply.reason
    assert all(_closed(fd) for fd in fds), "the reference closes what it was sent"
    # A buffer far larger than the outputs and inputs together is refused before it is mapped.
    huge = 2 * (CLAIM_FACTOR * 64 * 32 * 4 + CLAIM_SLACK) + (8 << 20)
    fd = os.open(tmp_path, os.O_RDONLY)
    reply = _compare(w, {**desc, "shared": {"offset": 0, "size": huge}}, Blobs([], [fd]))
    assert not reply.passed and "shared buffer is far larger" in reply.reason
    # One descriptor, but this is a CPU evaluation: nothing is mapped, the message says why, the descriptor closed.
    fd = os.open(tmp_path, os.O_RDONLY)
    reply = _compare(w, desc, Blobs([], [fd]))
    assert not reply.passed and "shared buffers are CUDA memory" in reply.reason
    del reply
    import gc

    gc.collect()
    assert _closed(fd)


def test_the_reference_probe_fails_cleanly_without_a_buffer(tmp_path):
    w = _reference()
    reply, _ = w.cmd_check_shared(protocol.CheckShared(fill=7, size=2 << 20), Blobs([], []))
    assert reply.shared is False and "one descriptor expected, 0 came" in reply.detail
    fd = os.open(tmp_path, os.O_RDONLY)
    reply, _ = w.cmd_check_shared(protocol.CheckShared(fill=7, size=2 << 20), Blobs([], [fd]))
    assert reply.shared is False and reply.detail and _closed(fd)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU side is tested in tests/test_sandbox_gpu.py")
def test_without_a_gpu_driver_the_arena_stays_ordinary_and_says_why():
    arena = ExportArena(torch, torch.device("cpu"))
    why = arena.share(True)
    assert why and arena.sharing is False and arena.shared is None
    arena.begin(1024)
    assert arena.buf is not None and arena.buf.numel() >= 1024 and arena.shared is None
    w = Worker("candidate", "cpu")
    reply, blobs = w.cmd_share(protocol.Share(enable=True, fill=3), [])
    assert reply.shared is False and "CPU worker" in reply.detail and list(blobs) == []


def test_the_transport_choice_is_checked(monkeypatch):
    monkeypatch.setenv(sharing.TRANSPORT_ENV, "host")
    assert sharing.sharing_wanted() is False
    monkeypatch.setenv(sharing.TRANSPORT_ENV, "shared")
    assert sharing.sharing_wanted() is True
    monkeypatch.setenv(sharing.TRANSPORT_ENV, "ipc")
    with pytest.raises(ValueError, match="must be one of shared, host, not 'ipc'"):
        sharing.sharing_wanted()


def test_descriptors_sent_with_every_byte_of_a_header_are_not_all_taken(pair, tmp_path):
    """Review finding: descriptors riding on each small piece of a header. Only the first read of a message takes
    any (the kernel closes the rest), so a message never brings more than MAX_FDS, and none leaks."""
    sender, receiver = pair
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        before = _open_fds()
        for announced in (MAX_FDS, 3 * MAX_FDS):
            body = json.dumps({"_nblobs": 0, "_nfds": announced}).encode()
            data = struct.pack(">Q", len(body)) + body
            for i in range(len(data)):  # one byte at a time, each with MAX_FDS descriptors
                sender.sock.sendmsg([data[i:i + 1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                      array.array("i", [fd] * MAX_FDS))])
            if announced == MAX_FDS:
                _, blobs = receiver.recv(timeout=5)
                assert len(blobs.fds) == MAX_FDS
                del blobs
            else:
                with pytest.raises(ProtocolError, match=f"announces {announced} descriptors and carries {MAX_FDS}"):
                    receiver.recv(timeout=5)
            assert _open_fds() == before
    finally:
        os.close(fd)


def test_the_parent_passes_on_only_the_one_descriptor_a_shared_buffer_needs(tmp_path):
    from kernelbench.evaluation.parent.workers import WorkerFailed, relayed

    w = start_worker("candidate", "cpu", "torch", None, init=False)
    try:
        shared = {"dtype": "float32", "shape": [4], "device": "cuda:0", "shared": {"offset": 0, "size": 2 << 20}}
        plain = {"dtype": "float32", "shape": [4], "device": "cpu", "blob": 0}

        def reply(*descs):
            return protocol.ExportReply(tree={"t": "tensor", "i": 0}, outputs=list(descs), inputs=[], threads_started=0)

        def fds(n):
            return [os.open(tmp_path, os.O_RDONLY) for _ in range(n)]

        # No shared description: the candidate's descriptors are closed, none reaches the reference.
        sent = fds(2)
        _, out = relayed(w, reply(plain), Blobs([b"x" * 16], sent), "run")
        assert list(out) == [b"x" * 16] and out.fds == [] and all(_closed(fd) for fd in sent)
        # Shared, but the reference has not read this candidate's probe: refused, descriptors closed.
        sent = fds(1)
        with pytest.raises(WorkerFailed, match="whose buffer the reference has read"):
            relayed(w, reply(shared), Blobs([], sent), "run")
        assert _closed(sent[0])
        w.shares = True
        sent = fds(2)
        with pytest.raises(WorkerFailed, match="one descriptor, not 2"):
            relayed(w, reply(shared), Blobs([], sent), "run")
        assert all(_closed(fd) for fd in sent)
        sent = fds(1)
        _, out = relayed(w, reply(shared), Blobs([], sent), "run")
        assert out.fds == sent and not _closed(sent[0])
        out.close_fds()
    finally:
        w.kill()


#: A candidate whose worker answers ``Release`` with an error (its code found the worker object and patched it).
RELEASE_REFUSER = '''
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def _refuse(cmd, blobs):
    raise RuntimeError("no release today")


# The worker is found on the stack (its Load is importing this module): the objects a worker made before any
# candidate code are frozen out of gc.get_objects()'s reach, but not out of its frames'.
_f = sys._getframe()
while _f is not None:
    _o = _f.f_locals.get("self")
    if type(_o).__name__ == "Worker" and hasattr(_o, "cmd_release"):
        _o.cmd_release = _refuse
        break
    _f = _f.f_back
'''


def test_a_candidate_refusing_a_command_outside_a_stage_gets_a_verdict_not_a_rerun(relu_problem):
    """Review finding: a candidate's error reply where no stage caught it counted as our infrastructure failure
    (not a verdict, evaluated again on every resume). It is the candidate's failure."""
    from kernelbench.evaluation import EvalJob, EvalSettings, evaluate
    from kernelbench.results import Stage

    settings = EvalSettings(backend="torch", device="cpu", static_guard=False, correctness_trials=1)
    result = evaluate(EvalJob(relu_problem, RELEASE_REFUSER, settings))
    assert not result.correct and result.error is not None
    assert result.error.stage != Stage.INFRASTRUCTURE and "no release today" in result.error.message, result.error
    assert not any("not a verdict" in f for f in result.flags), result.flags
