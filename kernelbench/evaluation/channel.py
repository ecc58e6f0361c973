"""A message channel between the trusted parent and a worker process.

Messages are JSON objects followed by raw binary frames; nothing is ever unpickled, because
the peer may be a candidate process whose code we do not trust. Each frame is an 8-byte
big-endian length and its payload. Sizes are capped so a hostile peer cannot make the
trusted side allocate without bound.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Sequence

MAX_HEADER_BYTES = 64 * 1024 * 1024
MAX_BLOBS = 256
MAX_BLOB_BYTES = 64 * 1024**3
_LEN = struct.Struct(">Q")


class ChannelClosed(Exception):
    """The peer closed its end (it exited, crashed or was killed)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message."""


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock

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
        header = json.dumps({**msg, "_nblobs": len(blobs)}, allow_nan=True).encode("utf-8")
        self.sock.settimeout(None)
        try:
            self.sock.sendall(_LEN.pack(len(header)) + header)
            for b in blobs:
                mv = memoryview(b).cast("B")
                self.sock.sendall(_LEN.pack(mv.nbytes))
                self.sock.sendall(mv)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ChannelClosed(str(e)) from None

    # ---- receiving
    def recv(self, timeout: float | None = None) -> tuple[dict, list[bytearray]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        header = self._recv_frame(deadline, MAX_HEADER_BYTES)
        try:
            msg = json.loads(header.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ProtocolError(f"malformed message header: {e}") from None
        if not isinstance(msg, dict):
            raise ProtocolError("message header is not an object")
        n = msg.pop("_nblobs", 0)
        if not isinstance(n, int) or not 0 <= n <= MAX_BLOBS:
            raise ProtocolError(f"bad blob count {n!r}")
        blobs = [self._recv_frame(deadline, MAX_BLOB_BYTES) for _ in range(n)]
        return msg, blobs

    def _recv_exact(self, n: int, deadline: float | None) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChannelTimeout()
                self.sock.settimeout(remaining)
            else:
                self.sock.settimeout(None)
            try:
                k = self.sock.recv_into(view[got:], n - got)
            except TimeoutError:
                raise ChannelTimeout() from None
            except (ConnectionResetError, OSError) as e:
                raise ChannelClosed(str(e)) from None
            if k == 0:
                raise ChannelClosed("peer closed the channel")
            got += k
        return buf

    def _recv_frame(self, deadline: float | None, limit: int) -> bytearray:
        (length,) = _LEN.unpack(self._recv_exact(_LEN.size, deadline))
        if length > limit:
            raise ProtocolError(f"frame of {length} bytes exceeds the limit of {limit}")
        return self._recv_exact(length, deadline) if length else bytearray()
