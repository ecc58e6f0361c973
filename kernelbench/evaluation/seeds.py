"""Per-trial seeds derived from a per-evaluation secret that never leaves the trusted parent.

A worker learns a seed only when it is asked to generate that trial's inputs, so a candidate
cannot precompute future inputs (or their outputs) at import or construction time.
"""

from __future__ import annotations

import hashlib
import hmac
import os


def new_secret() -> bytes:
    return os.urandom(32)


def derive_seed(secret: bytes, *parts: object) -> int:
    msg = ":".join(str(p) for p in parts).encode()
    digest = hmac.new(secret, msg, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 62) - 1)


#: The seed both ``Model`` and ``ModelNew`` are built with. Weights are not secret (both sides need them
#: and they are fixed by the problem); the seed only has to be the same for Model and ModelNew.
INIT_SEED = 42
