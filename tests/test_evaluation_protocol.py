"""The parent-worker protocol: every command and reply survives the real channel, and a header with a
missing or unknown key, or of the wrong kind, is a ProtocolError that names what is wrong."""

from __future__ import annotations

import dataclasses
import math
import socket

import pytest

from kernelbench.evaluation import protocol as p
from kernelbench.evaluation.channel import Channel, ProtocolError

#: One example of every message, with values of the shapes the evaluator sends (nested lists and dicts,
#: None, an infinite float).
EXAMPLES: list[p.Command | p.Reply] = [
    p.Init(),
    p.Init(warm=False),
    p.Warm(),
    p.Warm(pieces=1),
    p.Recycle(),
    p.Setup(code="class Model: ...", precision="fp32", atol=1e-4, rtol=1e-4, init_seed=42, probe_seed=7,
            ieee_fp32=True, compile_mode=None),
    p.Load(problem_code="x = 1", source="y = 2", backend="triton", record_launches=True, precision="bf16", init_seed=42, eval_mode=False,
           cache_namespace=None, cache_scope="ab" * 8, ieee_fp32=False),
    p.Run(seed=1, fwd_seed=2, slot=0, poison=False),
    p.Run(seed=1, fwd_seed=2, slot=None, poison=True),
    p.Compare(slot="last", tree={"t": "tensor", "i": 0}, outputs=[{"blob": 0, "dtype": "float32"}], inputs=[]),
    p.Release(),
    p.Share(enable=True, fill=17),
    p.Share(enable=False, fill=None),
    p.CheckShared(fill=17, size=2 << 20),
    p.Time(seeds=[1, 2, 3], fwd_seeds=[4, 5, 6], warmup=False, fingerprint=True, cushion_us=200),
    p.ExportLast(),
    p.CheckPatches(when="while running"),
    p.Profile(seed=3, fwd_seed=4),
    p.Launches(seed=3, fwd_seed=4),
    p.Exit(),
    p.Ready(pid=1234),
    p.ErrorReply(where="load", type="ImportError", message="no module named x", traceback="Traceback ...",
                 builds=[{"name": "ext", "failed": True, "error": "nvcc"}]),
    p.DoneReply(),
    p.InitReply(env={"device": "cpu", "torch": "2.13"}, preloaded=["torch._dynamo"], init_s=0.25),
    p.WarmReply(warm_s=0.4),
    p.WarmReply(warm_s=0.1, left=3),
    p.RecycleReply(clean=False, detail="the problem's code changed torch's global settings: cudnn.benchmark"),
    p.SetupReply(stochastic=True, nondeterministic=False, compile_s=1.5, compile_cache={"fxgraph_cache_hit": 1}),
    p.LoadReply(import_s=0.25, builds=[], threads_started=0, findings=[{"rule": "r", "severity": "warning"}]),
    p.ExportReply(tree={"t": "tuple", "items": []}, outputs=[], inputs=[], threads_started=None),
    p.ShareReply(shared=True, detail="", size=2 << 20),
    p.CompareReply(passed=False, reason="max abs error 1", max_abs=math.inf, max_rel=None, inputs_modified=True),
    p.TimeReply(times_ms=[0.5, 0.25], drained_ms=[0.5, 0.5], wall_s=0.01, calls=2, fingerprints=[[1.0, 2.0]],
                bounds=[[0.1, 0.2]], threads_started=0),
    p.PatchReply(findings=[], threads_started=None),
    p.ProfileReply(kernels=[{"name": "k", "stream": 7, "dur_us": 1.0}], marker_stream=7, host_enqueue_us=12.5,
                   gpu_busy_us=30.0, unowned_outputs=[0], n_outputs=1, recorded=True),
    p.LaunchesReply(launches={"relu_kernel": 1}, unowned_outputs=[], n_outputs=1, recorded=False),
]


def _through_channel(header: dict) -> dict:
    a, b = socket.socketpair()
    Channel(a).send(header)
    got, _ = Channel(b).recv(timeout=5)
    return got


def _encode(msg) -> dict:
    return p.encode_command(msg) if isinstance(msg, p.Command) else p.encode_reply(msg, [1, 2])


def _decode(header: dict, cls: type):
    if issubclass(cls, p.Command):
        return p.decode_command(header)
    reply, mem = p.decode_reply(header, cls)
    assert mem == [1, 2]
    return reply


def test_the_examples_cover_every_message_kind():
    assert {type(m) for m in EXAMPLES} == set(p.COMMANDS.values()) | set(p.REPLIES.values())


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_survives_the_channel(msg):
    back = _decode(_through_channel(_encode(msg)), type(msg))
    assert type(back) is type(msg) and back == msg


@pytest.mark.parametrize("msg", [m for m in EXAMPLES if dataclasses.fields(m)], ids=lambda m: type(m).__name__)
def test_a_missing_key_is_a_protocol_error_naming_it(msg):
    for f in dataclasses.fields(msg):
        header = _encode(msg)
        del header[f.name]
        with pytest.raises(ProtocolError, match=f"{type(msg).__name__} message: missing key.*'{f.name}'"):
            _decode(header, type(msg))


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_an_unknown_key_is_a_protocol_error_naming_it(msg):
    header = {**_encode(msg), "ok": True}
    with pytest.raises(ProtocolError, match=f"{type(msg).__name__} message: unknown key.*'ok'"):
        _decode(header, type(msg))


def test_a_reply_without_its_memory_counters_is_an_error():
    header = p.encode_reply(p.DoneReply())
    del header["cuda_mem"]
    with pytest.raises(ProtocolError, match="missing key.*'cuda_mem'"):
        p.decode_reply(header, p.DoneReply)


def test_unknown_commands_and_replies_and_the_wrong_reply_are_errors():
    with pytest.raises(ProtocolError, match="unknown command 'launch_missiles'"):
        p.decode_command({"cmd": "launch_missiles"})
    with pytest.raises(ProtocolError, match="unknown command None"):
        p.decode_command({"seed": 1})
    with pytest.raises(ProtocolError, match="unknown reply kind 'great'"):
        p.decode_reply({"reply": "great", "cuda_mem": None}, p.DoneReply)
    with pytest.raises(ProtocolError, match="expected a TimeReply, got a CompareReply"):
        p.decode_reply(p.encode_reply(next(m for m in EXAMPLES if isinstance(m, p.CompareReply))), p.TimeReply)


def test_an_error_reply_answers_any_command():
    err = p.ErrorReply(where="run", type="RuntimeError", message="boom", traceback=None, builds=None)
    for cls in p.REPLIES.values():
        reply, mem = p.decode_reply(p.encode_reply(err), cls)
        assert reply == err and not reply.ok and mem is None
    assert all(cls.ok for cls in p.REPLIES.values() if cls is not p.ErrorReply)


# ------------------------------------------------------------------ real processes
#: A candidate that writes a reply of its own onto the worker's channel (its fd is on the command line),
#: well framed but without two of an ExportReply's keys, before the worker answers the correctness run.
FORGER = '''
import json, os, socket, sys
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        fd = int(sys.argv[sys.argv.index("--fd") + 1])
        header = json.dumps({"reply": "export", "cuda_mem": None, "tree": {"t": "tensor", "i": 0},
                             "outputs": [], "_nblobs": 0}).encode()
        sock = socket.socket(fileno=os.dup(fd))
        sock.sendall(len(header).to_bytes(8, "big") + header)
        return torch.relu(x)
'''


def test_a_worker_answers_a_malformed_command_with_a_protocol_error_and_goes_on():
    from kernelbench.evaluation.parent import start_worker

    w = start_worker("reference", "cpu", init=False)
    try:
        w.channel.send({"cmd": "run", "seed": 1, "fwd_seed": 2})
        reply, _ = p.decode_reply(w.channel.recv(60)[0], p.DoneReply)
        assert isinstance(reply, p.ErrorReply) and reply.where == "protocol" and reply.type == "ProtocolError"
        assert "Run message: missing key(s) 'slot', 'poison'" in reply.message
        w.channel.send({**p.encode_command(p.Init()), "verbose": True})
        reply, _ = p.decode_reply(w.channel.recv(60)[0], p.InitReply)
        assert isinstance(reply, p.ErrorReply) and "unknown key(s) 'verbose'" in reply.message
        w.channel.send(p.encode_command(p.Init()))  # still serving: a well-formed command is answered
        reply, _ = p.decode_reply(w.channel.recv(120)[0], p.InitReply)
        assert isinstance(reply, p.InitReply) and reply.env["device"] == "cpu"
        w.channel.send(p.encode_command(p.Exit()))
        assert w.proc.wait(timeout=30) == 0
    finally:
        w.kill()


def test_a_candidate_forging_a_malformed_reply_is_killed_and_fails_as_a_crash(relu_problem):
    from kernelbench.evaluation import EvalJob, EvalSettings, evaluate
    from kernelbench.results import Stage

    settings = EvalSettings(backend="torch", device="cpu", static_guard=False, correctness_trials=1)
    result = evaluate(EvalJob(relu_problem, FORGER, settings))
    assert not result.correct and result.error is not None
    assert (result.error.stage, result.error.type) == (Stage.CRASH, "WorkerDied")
    assert "malformed message: ExportReply message: missing key(s) 'inputs', 'threads_started'" in result.error.message


def _raw_message(header: dict, blobs: list[bytes]) -> bytes:
    """The bytes Channel.send writes for ``header`` and ``blobs`` (no descriptors)."""
    import json
    import struct

    body = json.dumps({**header, "_nblobs": len(blobs)}).encode()
    out = struct.pack(">Q", len(body)) + body
    for b in blobs:
        out += struct.pack(">Q", len(b)) + b
    return out


@pytest.mark.parametrize("cut", [3, 8, 20, None])
def test_a_timeout_in_the_middle_of_a_message_loses_nothing(cut):
    """A poll with a short timeout that expires while a long message is arriving must leave the channel where it
    was: the server's supervisor polls every half second, and one result read from its middle made a live
    evaluator look dead (session 18's load test: one restart in 500 requests)."""
    from kernelbench.evaluation.channel import ChannelTimeout

    a, b = socket.socketpair()
    reader = Channel(b)
    first = {"event": "result", "id": "j1", "result": {"samples": list(range(2000))}}
    second = {"event": "result", "id": "j2", "result": {}}
    data = _raw_message(first, [b"x" * 70_000, b""]) + _raw_message(second, [])
    split = len(data) - 90_000 if cut is None else cut  # inside the header frame's length, header, or a blob
    a.sendall(data[:split])
    with pytest.raises(ChannelTimeout):
        reader.recv(timeout=0.2)
    with pytest.raises(ChannelTimeout):
        reader.recv(timeout=0.05)  # twice: nothing arrived in between
    a.sendall(data[split:])
    got, blobs = reader.recv(timeout=5)
    assert got == first and [len(x) for x in blobs] == [70_000, 0] and bytes(blobs[0]) == b"x" * 70_000
    got2, blobs2 = reader.recv(timeout=5)
    assert got2 == second and list(blobs2) == []


def test_a_timeout_keeps_the_descriptors_that_came_with_the_message():
    import os

    from kernelbench.evaluation.channel import Blobs, ChannelTimeout

    a, b = socket.socketpair()
    sender, reader = Channel(a), Channel(b)
    r, w = os.pipe()
    try:
        big = b"y" * 3_000_000  # more than the socket buffer: the send blocks until the reader reads
        import threading

        t = threading.Thread(target=sender.send, args=({"event": "share"}, Blobs([big], [r], owned=False)))
        t.start()
        got = None
        for _ in range(200):
            try:
                got = reader.recv(timeout=0.001)
                break
            except ChannelTimeout:
                continue
        if got is None:
            got = reader.recv(timeout=10)
        t.join(5)
        msg, blobs = got
        assert msg == {"event": "share"} and bytes(blobs[0]) == big
        fds = blobs.take_fds()
        assert len(fds) == 1
        os.write(w, b"ok")
        assert os.read(fds[0], 2) == b"ok"
        os.close(fds[0])
    finally:
        os.close(r)
        os.close(w)
