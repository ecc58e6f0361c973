"""Read a pull request's submission files out of git as data, without checking anything out.

The evaluate job holds the Modal token, so it must never put the pull request's files where they
could run: it fetches the head commit's objects into the trusted checkout and copies single blobs
(``git cat-file blob``, no filters, no hooks) into a plain folder. The working tree and HEAD stay
the base branch's. Standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ci_github import CIError

SUBMISSIONS_DIR = "submissions"
#: Files in submissions/ that are not entries.
NOT_ENTRIES = frozenset({"submissions/README.md"})
#: Same limit as leaderboard.schema.MAX_FILE_BYTES: larger blobs are refused before they are read.
MAX_FILE_BYTES = 50 * 1024 * 1024
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class ChangedFiles:
    """Submission paths a pull request adds or modifies, and those it deletes (repo-relative)."""

    base: str
    head: str
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


@dataclass
class Export:
    head: str
    written: list[str] = field(default_factory=list)
    #: path -> why it was not copied (too large, an odd path).
    refused: dict[str, str] = field(default_factory=dict)


def git(repo: str | Path, *args: str, env: dict[str, str] | None = None, binary: bool = False):
    """Run git in ``repo``; a failure is a one-line CIError with git's own message."""
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=full_env, check=False)
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CIError(f"git {' '.join(args[:3])} failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
    return proc.stdout if binary else proc.stdout.decode("utf-8", "replace")


def check_sha(sha: str, what: str) -> str:
    if not _SHA_RE.match(sha or ""):
        raise CIError(f"{what} {sha!r} is not a full 40-character commit SHA")
    return sha


def changed_submissions(repo: str | Path, base: str, head: str) -> ChangedFiles:
    """What the pull request changed under submissions/, against its merge base with ``base``.

    Three-dot semantics (merge base, not the base tip) so that entries merged into main after the
    pull request branched off are not mistaken for the pull request's own.
    """
    merge_base = git(repo, "merge-base", base, head).strip()
    out = git(repo, "diff", "--name-status", "--no-renames", "-z", merge_base, head, "--", f"{SUBMISSIONS_DIR}/")
    parts = [p for p in out.split("\0") if p]
    result = ChangedFiles(base=merge_base, head=head)
    for status, path in zip(parts[0::2], parts[1::2]):
        if path in NOT_ENTRIES:
            continue
        (result.deleted if status.startswith("D") else result.changed).append(path)
    result.changed.sort()
    result.deleted.sort()
    return result


def _auth_env(token: str | None) -> dict[str, str]:
    """The token as a one-off git config header (GIT_CONFIG_* env), never on disk or in argv."""
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraheader",
            "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}"}


def fetch_pr_head(repo: str | Path, pr: int, expected_sha: str | None = None, token: str | None = None,
                  remote: str = "origin") -> str:
    """Fetch ``refs/pull/<pr>/head`` into ``refs/remotes/pr/<pr>``; return its commit.

    With ``expected_sha`` (the commit a maintainer labelled), a head that moved since is refused:
    what gets evaluated must be what was reviewed.
    """
    if pr <= 0:
        raise CIError(f"pull request number must be positive, got {pr}")
    git(repo, "fetch", "--no-tags", "--quiet", remote, f"+refs/pull/{pr}/head:refs/remotes/pr/{pr}",
        env=_auth_env(token))
    head = git(repo, "rev-parse", f"refs/remotes/pr/{pr}^{{commit}}").strip()
    if expected_sha:
        check_sha(expected_sha, "expected head")
        if head != expected_sha:
            raise CIError(f"pull request #{pr} now points at {head[:12]}, not the labelled commit {expected_sha[:12]}: "
                          "it changed after the label was added; review it and add the label again")
    return head


def safe_submission_path(path: str) -> str | None:
    """Why ``path`` cannot be copied out, or None: only plain relative paths under submissions/."""
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not p.parts or p.parts[0] != SUBMISSIONS_DIR:
        return "not a path inside submissions/"
    if any(ch in path for ch in "\0\r\n\\") or any(part.startswith(".") for part in p.parts):
        return "the path has control characters, backslashes or hidden components"
    return None


def export_blobs(repo: str | Path, head: str, paths: list[str], out_dir: str | Path,
                 max_bytes: int = MAX_FILE_BYTES) -> Export:
    """Copy each path's blob at ``head`` to ``out_dir/<path>`` byte for byte."""
    check_sha(head, "head")
    out = Path(out_dir)
    result = Export(head=head)
    for path in paths:
        why = safe_submission_path(path)
        if why is None:
            entry = git(repo, "ls-tree", "-z", head, "--", path).split("\0")[0]
            mode = entry.split(" ", 1)[0] if entry else ""
            if mode not in ("100644", "100755"):
                why = "a symbolic link, submodule or folder, not a regular file" if mode else "not in the commit"
        if why is None:
            size = int(git(repo, "cat-file", "-s", f"{head}:{path}").strip())
            if size > max_bytes:
                why = f"{size} bytes, over the {max_bytes}-byte limit for a submission file"
        if why is not None:
            result.refused[path] = why
            continue
        dest = out / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(git(repo, "cat-file", "blob", f"{head}:{path}", binary=True))
        result.written.append(path)
    return result


def write_manifest(out_dir: str | Path, changed: ChangedFiles, export: Export | None, pr: int) -> Path:
    """``manifest.json`` beside the copied files: what was read from which commit, for later steps."""
    path = Path(out_dir) / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "pr": pr, "head_sha": changed.head, "merge_base": changed.base,
        "changed": changed.changed, "deleted": changed.deleted,
        "refused": export.refused if export else {},
    }, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path
