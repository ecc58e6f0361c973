"""How a sandboxed candidate's CUDA outputs reach the reference: a shared device buffer, or host copies.

A sandboxed candidate cannot use CUDA IPC (docs/threat-model.md). Its exports go through one device buffer it
shares by file descriptor (:mod:`kernelbench.evaluation.shared_memory`) when the reference proves it can read
it, and as host copies otherwise. The proof is per candidate: before the candidate's code loads (nothing but
our worker code in it yet) it fills the start of its buffer with a byte the parent chose (:func:`offer`); after
the load, with the reference idle, the reference maps the buffer and checks that byte (:func:`settle`). Only
then does the parent accept exports that name the buffer. Whatever fails (an old driver, a container that
cannot share device memory, a candidate that spoils its buffer) leaves that candidate on host copies.
``KB_SANDBOX_TRANSPORT=host`` keeps every candidate on host copies.
"""

from __future__ import annotations

import logging
import os
import secrets

from kernelbench.evaluation import protocol
from kernelbench.evaluation.parent.verdict import Verdict, stage_of
from kernelbench.evaluation.parent.workers import WorkerFailed, call, reference_call
from kernelbench.evaluation.sandbox import WorkerProcess
from kernelbench.evaluation.settings import EvalSettings
from kernelbench.results import Stage

log = logging.getLogger(__name__)

#: ``shared`` (the default) or ``host``: how a sandboxed candidate's CUDA outputs travel.
TRANSPORT_ENV = "KB_SANDBOX_TRANSPORT"
TRANSPORTS = ("shared", "host")
_warned: set[str] = set()


def sharing_wanted() -> bool:
    """``KB_SANDBOX_TRANSPORT``, checked (ValueError names the choices)."""
    value = os.environ.get(TRANSPORT_ENV, "shared")
    if value not in TRANSPORTS:
        raise ValueError(f"{TRANSPORT_ENV} must be one of {', '.join(TRANSPORTS)}, not {value!r}")
    return value == "shared"


def offer(s: EvalSettings, cand: WorkerProcess) -> None:
    """Before the candidate's code loads: make its export buffer shareable, its start filled for the probe."""
    if cand.confinement is None or not cand.device.startswith("cuda") or not sharing_wanted():
        return
    fill = secrets.randbelow(255) + 1
    try:
        reply, blobs = call(cand, protocol.Share(enable=True, fill=fill), protocol.ShareReply, s.stage_timeout_s,
                            Stage.LOAD, "a shared export buffer")
    except WorkerFailed as e:  # our own worker code, before any candidate code: never the candidate's verdict
        _note(f"the candidate worker could not share: {e.reply.type}: {e.reply.message}")
        return
    if not reply.shared:
        _note(f"the candidate worker could not make a shared buffer: {reply.detail}")
        return
    cand.share_probe = (fill, int(reply.size), blobs)


def settle(s: EvalSettings, v: Verdict, ref: WorkerProcess, cand: WorkerProcess) -> bool:
    """After the load, the reference idle: the reference reads the probe; only then may exports name the buffer.

    False when the candidate (its code loaded by now) refused to go back to host copies: ``v`` says so."""
    probe, cand.share_probe = cand.share_probe, None
    if probe is None:
        return True
    fill, size, blobs = probe
    try:
        check, _ = reference_call(ref, protocol.CheckShared(fill=fill, size=size), protocol.ShareReply,
                                  s.stage_timeout_s, "the check of a shared export buffer", blobs)
    finally:
        blobs.close_fds()
    if check.shared:
        cand.shares = True
        return True
    _note(f"the reference could not read the candidate's shared buffer: {check.detail}")
    try:
        call(cand, protocol.Share(enable=False, fill=None), protocol.ShareReply, s.stage_timeout_s, Stage.RUN,
             "host copies instead of a shared buffer")
    except WorkerFailed as e:
        v.fail_with(e.reply, stage_of(e.reply, Stage.RUN))
        return False
    return True


def _note(why: str) -> None:
    """Host copies instead (slower, equally exact): said once per reason."""
    if why not in _warned:
        _warned.add(why)
        log.warning("a sandboxed candidate's outputs travel as host copies: %s", why)
