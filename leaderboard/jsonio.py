"""Strict reading of untrusted JSON files: size first, then UTF-8, then JSON with duplicate keys kept.

Submissions arrive in pull requests from strangers. ``json.load`` would read a 200 MB file into
memory, silently keep the last of two duplicate keys and accept ``NaN``; here each of those is a
finding with a clear message, and the size is checked with ``stat`` before a byte is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class JsonDocument:
    """The parsed value and what was wrong with it short of being unreadable."""

    value: Any = None
    size_bytes: int = 0
    raw: bytes = b""
    #: Fatal problems: the value is None when any is present.
    errors: list[str] = field(default_factory=list)
    #: Keys that appeared more than once in one JSON object (each repeat listed once).
    duplicate_keys: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


class _DuplicateTracker:
    """``object_pairs_hook`` that records duplicates instead of dropping them silently."""

    def __init__(self) -> None:
        self.duplicates: list[str] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                self.duplicates.append(key)
            out[key] = value
        return out


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON (use a number or null)")


def human_bytes(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


def read_json_document(path: str | Path, max_bytes: int) -> JsonDocument:
    """Read ``path`` as JSON, refusing files over ``max_bytes`` without reading them."""
    path = Path(path)
    doc = JsonDocument()
    if not path.exists():
        doc.errors.append(f"{path} does not exist")
        return doc
    if not path.is_file():
        doc.errors.append(f"{path} is not a regular file")
        return doc
    size = path.stat().st_size
    doc.size_bytes = size
    if size > max_bytes:
        doc.errors.append(
            f"{path} is {human_bytes(size)}, over the {human_bytes(max_bytes)} limit for a submission file"
        )
        return doc
    with open(path, "rb") as f:
        raw = f.read(max_bytes + 1)  # a file that grew since stat() is still bounded
    if len(raw) > max_bytes:
        doc.errors.append(f"{path} is over the {human_bytes(max_bytes)} limit for a submission file")
        return doc
    doc.raw = raw
    return parse_json_bytes(raw, str(path), doc)


def parse_json_bytes(raw: bytes, where: str, doc: JsonDocument | None = None) -> JsonDocument:
    doc = doc or JsonDocument(size_bytes=len(raw))
    doc.raw = raw
    if raw.startswith(b"\xef\xbb\xbf"):
        doc.warnings.append(f"{where} starts with a UTF-8 byte-order mark; it was ignored")
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        doc.errors.append(
            f"{where} is not UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start} (line {line}) cannot be decoded"
        )
        return doc
    if not text.strip():
        doc.errors.append(f"{where} is empty")
        return doc
    tracker = _DuplicateTracker()
    try:
        doc.value = json.loads(text, object_pairs_hook=tracker, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        doc.errors.append(f"{where} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")
        doc.value = None
        return doc
    except ValueError as e:
        doc.errors.append(f"{where}: {e}")
        doc.value = None
        return doc
    except RecursionError:
        doc.errors.append(f"{where} is nested too deeply to be a submission")
        doc.value = None
        return doc
    doc.duplicate_keys = tracker.duplicates
    return doc
