"""Small file helpers: atomic writes and an advisory lock, so a killed run never leaves half a file."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600 files; results are meant to be shared
        with os.fdopen(fd, "w", encoding=encoding) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | Path, data: Any, indent: int | None = 2, sort_keys: bool = False) -> None:
    atomic_write_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys, allow_nan=False) + "\n")


def read_json(path: str | Path, error: type[Exception], label: str = "") -> Any:
    """The JSON document in ``path``, or ``error`` with one line that names the file: missing or not JSON.

    ``label`` goes before the path in the message (``"baseline file "``); the caller checks the shape.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{label}{path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{label}{path} is not valid JSON: {e}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Exclusive advisory lock on ``path`` (created if needed); serialises read-modify-write cycles."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
