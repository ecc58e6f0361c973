"""A content-addressed cache of CUDA extensions built by candidates through ``load_inline``.

Installed inside candidate and compile workers before the candidate is imported. The key
covers everything that changes the binary: sources, exported functions, compiler and linker
flags, torch and CUDA versions, target architectures and Python version. A hit imports the
cached shared object directly (milliseconds, no ninja); a miss builds in a private folder and
publishes the result with an atomic rename, so concurrent writers (several local workers, or
Modal containers sharing a Volume) never see a half-written entry.

The root comes from ``KERNELBENCH_CACHE_DIR`` (default ``~/.cache/kernelbench/extensions``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CACHE_ENV = "KERNELBENCH_CACHE_DIR"

#: Filled by the wrapper so the worker can tell a build failure from other import errors.
BUILD_EVENTS: list[dict] = []


_namespace: str | None = None


def set_namespace(namespace: str | None) -> None:
    """Confine this process's builds to ``<root>/ns-<namespace>`` (set once, before the candidate runs)."""
    global _namespace
    if namespace is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", namespace):
        raise ValueError(f"bad cache namespace {namespace!r}")
    _namespace = namespace


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    root = Path(env) if env else Path.home() / ".cache" / "kernelbench" / "extensions"
    return root / f"ns-{_namespace}" if _namespace else root


def _as_text(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        return {str(k): _as_text(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        return [_as_text(x) for x in v]
    return repr(v)


def toolchain_fingerprint() -> dict:
    import torch

    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if not arch and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}.{minor}"
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "arch": arch,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "platform": sys.platform,
    }


def extension_key(arguments: dict) -> str:
    material = {k: _as_text(v) for k, v in sorted(arguments.items())
                if k not in ("verbose", "build_directory", "keep_intermediates")}
    material["_toolchain"] = toolchain_fingerprint()
    blob = json.dumps(material, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def _import_shared_object(name: str, so_path: Path):
    spec = importlib.util.spec_from_file_location(name, so_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import cached extension {so_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _publish(root: Path, key: str, name: str, so_file: Path, meta: dict) -> None:
    staging = root / f".publish-{key}-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        shutil.copy2(so_file, staging / f"{name}.so")
        (staging / "meta.json").write_text(json.dumps(meta, indent=1))
        os.rename(staging, root / key)
    except OSError:
        # Another writer published the same key first; theirs is as good as ours.
        shutil.rmtree(staging, ignore_errors=True)


def cached_load_inline(original, *args, **kwargs):
    """Drop-in replacement for ``torch.utils.cpp_extension.load_inline``."""
    bound = inspect.signature(original).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    extra = arguments.pop("kwargs", None) or {}
    arguments.update(extra)
    name = arguments.get("name")
    if not arguments.get("is_python_module", True) or arguments.get("is_standalone", False) or not isinstance(name, str):
        return original(*args, **kwargs)
    key = extension_key(arguments)
    root = cache_root()
    entry = root / key
    so = entry / f"{name}.so"
    if so.exists():
        try:
            module = _import_shared_object(name, so)
            BUILD_EVENTS.append({"name": name, "key": key, "cached": True, "seconds": 0.0})
            return module
        except ImportError as e:
            log.warning("cached extension %s unusable (%s); rebuilding", so, e)
    root.mkdir(parents=True, exist_ok=True)
    build_dir = Path(tempfile.mkdtemp(prefix=f"build-{name}-", dir=root))
    t0 = time.perf_counter()
    event = {"name": name, "key": key, "cached": False}
    BUILD_EVENTS.append(event)
    try:
        arguments["build_directory"] = str(build_dir)
        module = original(**arguments)
    except BaseException as e:
        event["failed"] = True
        event["error"] = str(e)
        shutil.rmtree(build_dir, ignore_errors=True)
        raise
    event["seconds"] = time.perf_counter() - t0
    so_file = Path(getattr(module, "__file__", "") or "")
    if so_file.is_file():
        _publish(root, key, name, so_file, {"name": name, "key": key, "built_s": event["seconds"],
                                            "toolchain": toolchain_fingerprint()})
    shutil.rmtree(build_dir, ignore_errors=True)
    return module


def install() -> None:
    """Route ``load_inline`` through the cache in this process (a worker, never the parent)."""
    import torch.utils.cpp_extension as cpp

    original = cpp.load_inline
    if getattr(original, "_kernelbench_cached", False):
        return
    wrapper = functools.wraps(original)(functools.partial(cached_load_inline, original))
    wrapper._kernelbench_cached = True  # type: ignore[attr-defined]
    cpp.load_inline = wrapper
