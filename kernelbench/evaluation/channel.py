"""A message channel between the trusted parent and a worker process.

Messages are JSON objects followed by raw binary frames; nothing is ever unpickled, because
the peer may be a candidate process whose code we do not trust. Each frame is an 8-byte
big-endian length and its payload. Sizes are capped so a hostile peer cannot make the
trusted side allocate without bound.
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
import time
from collections.abc import Iterable, Sequence

MAX_HEADER_BYTES = 64 * 1024 * 1024
MAX_BLOBS = 256
MAX_BLOB_BYTES = 64 * 1024**3
#: File descriptors one message may carry (a sandboxed candidate's shared export buffer: one).
MAX_FDS = 4
_LEN = struct.Struct(">Q")
_FD_ANCILLARY = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)


class ChannelClosed(Exception):
    """The peer closed its end (it exited, crashed or was killed)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message."""


class Blobs(list):
    """A message's binary frames, and the file descriptors that came (or go) with it.

    Received descriptors belong to this object until :meth:`take_fds`; whatever is not taken is closed when it is
    collected (or by :meth:`close_fds`), so a peer cannot leak descriptors into us by sending ones nobody asked for.
    Descriptors to send that belong to someone else (``owned=False``) are never closed here.
    """

    def __init__(self, frames: Iterable = (), fds: Sequence[int] = (), owned: bool = True):
        super().__init__(frames)
        self.fds = list(fds)
        self.owned = owned

    def take_fds(self) -> list[int]:
        fds, self.fds = self.fds, []
        return fds

    def close_fds(self) -> None:
        fds, self.fds = self.fds, []
        if self.owned:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def __del__(self) -> None:
        self.close_fds()


def _fds_of(ancdata: list) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(data[:len(data) - len(data) % a.itemsize])
            fds.extend(a)
    return fds


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._fds: list[int] = []  # descriptors received with the message being read
        self._rx = _Receiving()

    @classmethod
    def from_fd(cls, fd: int) -> Channel:
        return cls(socket.socket(fileno=fd))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # ---- sending
    def send(self, msg: dict, blobs: Sequence[bytes | bytearray | memoryview] = ()) -> None:
        """Send ``msg`` and its frames; the descriptors of a :class:`Blobs` go with it (``SCM_RIGHTS``)."""
        fds = list(getattr(blobs, "fds", ()))
        if len(fds) > MAX_FDS:
            raise ValueError(f"a message carries at most {MAX_FDS} descriptors, not {len(fds)}")
        extra = {"_nfds": len(fds)} if fds else {}
        header = json.dumps({**msg, "_nblobs": len(blobs), **extra}, allow_nan=True).encode("utf-8")
        self.sock.settimeout(None)
        try:
            first = _LEN.pack(len(header)) + header
            if fds:  # the descriptors travel with the message's first bytes
                sent = self.sock.sendmsg([first], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
                first = first[sent:]
            self.sock.sendall(first)
            for b in blobs:
                mv = memoryview(b).cast("B")
                self.sock.sendall(_LEN.pack(mv.nbytes))
                self.sock.sendall(mv)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ChannelClosed(str(e)) from None

    # ---- receiving
    def recv(self, timeout: float | None = None) -> tuple[dict, Blobs]:
        """The next message and its frames (a :class:`Blobs`, holding the descriptors that came with it).

        A :class:`ChannelTimeout` loses nothing: what had arrived of a message stays in the channel, and the next
        call goes on from there. (It used to be dropped, so a poll with a short timeout that expired while a long
        message was arriving read the rest as a new message's length: a "dead" evaluator that was alive.)"""
        deadline = None if timeout is None else time.monotonic() + timeout
        st = self._rx
        try:
            if st.header is None:
                header = self._recv_frame(deadline, MAX_HEADER_BYTES, fds=True)
                try:
                    msg = json.loads(header.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as e:
                    raise ProtocolError(f"malformed message header: {e}") from None
                if not isinstance(msg, dict):
                    raise ProtocolError("message header is not an object")
                n = msg.pop("_nblobs", 0)
                if not isinstance(n, int) or not 0 <= n <= MAX_BLOBS:
                    raise ProtocolError(f"bad blob count {n!r}")
                nfds = msg.pop("_nfds", 0)
                if not isinstance(nfds, int) or isinstance(nfds, bool) or nfds != len(self._fds):
                    raise ProtocolError(f"the message announces {nfds!r} descriptors and carries {len(self._fds)}")
                st.header, st.nblobs = msg, n
            while len(st.blobs) < st.nblobs:
                st.blobs.append(self._recv_frame(deadline, MAX_BLOB_BYTES))
            msg, blobs = st.header, Blobs(st.blobs, self._fds)
            self._fds = []
            self._rx = _Receiving()
            return msg, blobs
        except ChannelTimeout:
            raise  # the message so far (and its descriptors) stays for the next call
        except BaseException:
            # A message that failed: its descriptors are closed, and the channel is of no further use.
            Blobs((), self._fds).close_fds()
            self._fds = []
            self._rx = _Receiving()
            raise

    def _recv_exact(self, n: int, deadline: float | None, fds: bool = False) -> bytearray:
        """``n`` bytes, resuming the read a timeout interrupted (the partial buffer is kept in the channel)."""
        st = self._rx
        if st.buf is None or len(st.buf) != n:
            st.buf, st.got = bytearray(n), 0
        buf = st.buf
        view = memoryview(buf)
        while st.got < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChannelTimeout()
                self.sock.settimeout(remaining)
            else:
                self.sock.settimeout(None)
            try:
                if fds and st.got == 0 and not st.first_read:
                    # A message's descriptors arrive with its first bytes, so only the first read of a message
                    # takes any: with a later read (no room for them) the kernel closes whatever came with it.
                    k, ancdata, flags, _ = self.sock.recvmsg_into([view[st.got:]], _FD_ANCILLARY,
                                                                  socket.MSG_CMSG_CLOEXEC)
                    self._fds.extend(_fds_of(ancdata))
                    if flags & socket.MSG_CTRUNC or len(self._fds) > MAX_FDS:
                        raise ProtocolError(f"more than {MAX_FDS} descriptors sent with one message")
                    if k:
                        st.first_read = True
                else:
                    k = self.sock.recv_into(view[st.got:], n - st.got)
            except TimeoutError:
                raise ChannelTimeout() from None
            except (ConnectionResetError, OSError) as e:
                raise ChannelClosed(str(e)) from None
            if k == 0:
                raise ChannelClosed("peer closed the channel")
            st.got += k
        st.buf, st.got = None, 0
        return buf

    def _recv_frame(self, deadline: float | None, limit: int, fds: bool = False) -> bytearray:
        """One frame; ``fds``: it is a message's first, whose first read takes the message's descriptors. Resumes
        where a timeout left it: the length already read is kept, so is the payload's part."""
        st = self._rx
        if st.frame_len is None:
            (length,) = _LEN.unpack(self._recv_exact(_LEN.size, deadline, fds))
            if length > limit:
                raise ProtocolError(f"frame of {length} bytes exceeds the limit of {limit}")
            st.frame_len = length
        length = st.frame_len
        data = self._recv_exact(length, deadline) if length else bytearray()
        st.frame_len = None
        return data


class _Receiving:
    """How far the message being received has got: its header once read, its frames so far, the frame being read
    (its length, its buffer and the bytes in it), and whether the message's first bytes (with its descriptors) have
    been read."""

    def __init__(self) -> None:
        self.header: dict | None = None
        self.nblobs = 0
        self.blobs: list[bytearray] = []
        self.frame_len: int | None = None
        self.buf: bytearray | None = None
        self.got = 0
        self.first_read = False
