"""A content-addressed cache of CUDA extensions built by candidates through ``load_inline``.

Installed inside candidate and compile workers before the candidate is imported. The key covers
everything that changes the binary: sources, exported functions, compiler and linker flags, torch and
CUDA versions, target architectures and Python version. A hit imports the cached shared object
directly (milliseconds, no ninja) after checking its SHA-256 against the entry's record.

Only trusted code writes the cache. A worker builds a miss into its private build folder
(``KB_BUILD_DIR``) and reports what it built; after the worker has exited, the parent copies each
artefact into the cache (:func:`publish_builds`) with its hash. Entries live under the hash of the
candidate source that built them (``src-<digest>``, set by the parent): a candidate that lies about a
key, or rewrites its artefact before exiting, can only poison its own later loads, never another
candidate's. Inside the OS sandbox the cache is mounted read-only.

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
import stat
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CACHE_ENV = "KERNELBENCH_CACHE_DIR"
#: A worker's private, writable build folder; the parent publishes from it after the worker exits.
BUILD_DIR_ENV = "KB_BUILD_DIR"
#: Larger artefacts are not cached (a CUDA extension is a few MB).
MAX_ARTEFACT_BYTES = 1 << 30

#: Filled by the wrapper so the worker can tell a build failure from other import errors.
BUILD_EVENTS: list[dict] = []

_KEY = re.compile(r"[0-9a-f]{32}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_SCOPE = re.compile(r"[0-9a-f]{16,64}")

_namespace: str | None = None
_scope: str | None = None


def set_namespace(namespace: str | None) -> None:
    """Confine this process's builds to ``<root>/ns-<namespace>`` (set once, before the candidate runs)."""
    global _namespace
    if namespace is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", namespace):
        raise ValueError(f"bad cache namespace {namespace!r}")
    _namespace = namespace


def set_scope(scope: str | None) -> None:
    """Look entries up under ``src-<scope>``: the digest of the candidate source, chosen by the parent."""
    global _scope
    if scope is not None and not _SCOPE.fullmatch(scope):
        raise ValueError(f"bad cache scope {scope!r}")
    _scope = scope


def source_scope(source: str) -> str:
    """The cache scope of a candidate source (the parent computes it from the source it sent)."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def base_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "kernelbench" / "extensions"


def cache_root() -> Path:
    root = base_root()
    return root / f"ns-{_namespace}" if _namespace else root


def _scoped(root: Path, scope: str | None) -> Path:
    return root / f"src-{scope}" if scope else root


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def _verified(entry: Path, so: Path) -> bool:
    """The artefact is the one the parent published: its hash matches the entry's record."""
    try:
        meta = json.loads((entry / "meta.json").read_text())
        return isinstance(meta, dict) and meta.get("sha256") == sha256_file(so)
    except (OSError, ValueError):
        return False


def _build_root() -> Path:
    env = os.environ.get(BUILD_DIR_ENV)
    if env:
        return Path(env)
    return Path(tempfile.mkdtemp(prefix="kb-build-"))  # outside a worker: built, loaded, never published


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
    entry = _scoped(cache_root(), _scope) / key
    so = entry / f"{name}.so"
    if so.is_file():
        if _verified(entry, so):
            try:
                module = _import_shared_object(name, so)
                BUILD_EVENTS.append({"name": name, "key": key, "cached": True, "seconds": 0.0})
                return module
            except ImportError as e:
                log.warning("cached extension %s unusable (%s); rebuilding", so, e)
        else:
            log.warning("cached extension %s does not match its recorded hash; rebuilding", so)
    build_root = _build_root()
    build_dir = build_root / f"{key}-{uuid.uuid4().hex[:8]}"
    build_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    event: dict[str, Any] = {"name": name, "key": key, "cached": False}
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
    try:
        event["artifact"] = str(so_file.resolve().relative_to(build_root.resolve()))
    except ValueError:
        pass
    return module


def _open_beneath(base: Path, rel: str) -> int:
    """Open ``base/rel`` for reading without following any symlink on the way (the folder was writable
    by candidate code, which may have left links to the parent's secrets)."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or any(p in ("..", ".", "") for p in parts):
        raise ValueError(f"bad artefact path {rel!r}")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for p in parts[:-1]:
            nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)


def publish_builds(build_root: Path, events: list, scope: str, namespace: str | None = None,
                   root: Path | None = None) -> list[str]:
    """Trusted side: copy what a worker built into the cache, with its hash; returns the keys published.

    ``events`` comes from the worker and is treated as untrusted data: keys, names and paths are
    checked, links are not followed, and only regular files under the worker's build folder are read.
    """
    if not _SCOPE.fullmatch(scope):
        raise ValueError(f"bad cache scope {scope!r}")
    base = root if root is not None else base_root()
    if namespace is not None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", namespace):
            raise ValueError(f"bad cache namespace {namespace!r}")
        base = base / f"ns-{namespace}"
    dest_root = _scoped(base, scope)
    published = []
    for ev in events if isinstance(events, list) else []:
        if not isinstance(ev, dict) or ev.get("cached") or ev.get("failed"):
            continue
        key, name, rel = ev.get("key"), ev.get("name"), ev.get("artifact")
        if not (isinstance(key, str) and _KEY.fullmatch(key) and isinstance(name, str) and _NAME.fullmatch(name)
                and isinstance(rel, str)):
            log.warning("ignoring a malformed build report from a worker: %r", ev)
            continue
        dest = dest_root / key
        if dest.exists():
            continue
        try:
            fd = _open_beneath(Path(build_root), rel)
        except (OSError, ValueError) as e:
            log.warning("not caching %s: %s", rel, e)
            continue
        staging = dest_root / f".publish-{key}-{uuid.uuid4().hex[:8]}"
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ARTEFACT_BYTES:
                log.warning("not caching %s: not a regular file of at most %d bytes", rel, MAX_ARTEFACT_BYTES)
                continue
            staging.mkdir(parents=True)
            h = hashlib.sha256()
            with os.fdopen(os.dup(fd), "rb") as src, open(staging / f"{name}.so", "wb") as out:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    h.update(chunk)
                    out.write(chunk)
            meta = {"name": name, "key": key, "scope": scope, "sha256": h.hexdigest(), "bytes": st.st_size,
                    "published_unix": time.time(), "built_s": ev.get("seconds")}
            (staging / "meta.json").write_text(json.dumps(meta, indent=1))
            os.rename(staging, dest)
            published.append(key)
        except OSError:
            # Another parent published the same key first; theirs is as good as ours.
            pass
        finally:
            os.close(fd)
            shutil.rmtree(staging, ignore_errors=True)
    return published


def install() -> None:
    """Route ``load_inline`` through the cache in this process (a worker, never the parent)."""
    import torch.utils.cpp_extension as cpp

    original = cpp.load_inline
    if getattr(original, "_kernelbench_cached", False):
        return
    wrapper = functools.wraps(original)(functools.partial(cached_load_inline, original))
    wrapper._kernelbench_cached = True  # type: ignore[attr-defined]
    cpp.load_inline = wrapper
