"""Where and how our own Triton kernels compile and run: the trusted processes' cache folders, the interpreter.

Triton compiles a kernel at its first launch for a signature and keeps it in ``TRITON_CACHE_DIR``. Our kernels (the
timed calls' fingerprint, the reference's comparisons) are compiled by reference workers, which run trusted code only,
into folders beside the extension cache that no sandbox is shown; a candidate's own Triton cache is private to its
worker (sandbox.private_environment).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def trusted_cache_dir(name: str = "triton-fingerprint") -> Path:
    """The Triton cache the reference workers (trusted code only) compile ``name``'s kernels into: beside the extension
    cache, never shown to a sandbox (the fingerprint's seeds candidate workers' caches: fingerprint_kernel.seed_cache)."""
    from kernelbench.evaluation import compile_cache

    return compile_cache.base_root().parent / name


def interpreting() -> bool:
    """Is Triton running kernels in its CPU interpreter (``TRITON_INTERPRET=1``, tests without a GPU)?"""
    return os.environ.get("TRITON_INTERPRET", "") == "1"


@contextlib.contextmanager
def triton_cache(path: Path | None) -> Iterator[None]:
    """Triton's cache folder is ``path`` inside the block (Triton reads ``TRITON_CACHE_DIR`` as it compiles)."""
    if path is None:
        yield
        return
    old = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = old
