"""Post or update one pull-request comment per purpose, through the GitHub REST API or a local file.

Standard library only: the ``comment`` workflow runs this with a bare Python, without installing
the package, so nothing a pull request changed is ever imported next to a write token.

Each comment starts with a hidden marker (``<!-- kernelbench:validate -->``); a later run finds
the bot's comment holding that marker and edits it instead of adding another. Where comments go is
chosen by ``KB_COMMENT_SINK``: ``github`` (default; ``GITHUB_API_URL``, ``GITHUB_REPOSITORY``,
``GITHUB_TOKEN``) or ``file:/path/comments.json``, a local record for dry runs and tests.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

#: GitHub refuses comment bodies over 65536 characters; leave room for the marker and a note.
MAX_BODY_CHARS = 60000
#: Who ``GITHUB_TOKEN`` comments as; only this author's comments are ever edited.
BOT_LOGIN = "github-actions[bot]"
_MARKER_RE = re.compile(r"<!--\s*kernelbench[^>]*-->", re.IGNORECASE)
_LINK_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class CIError(Exception):
    """A CI step cannot go on; the message is one line saying what and why."""


def marker(name: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
        raise CIError(f"comment marker name {name!r} must be lower-case letters, digits and '-'")
    return f"<!-- kernelbench:{name} -->"


def compose_body(name: str, body: str, limit: int = MAX_BODY_CHARS) -> str:
    """The marker, then ``body`` with any of our markers removed (the body may come from a
    pull request's own run and must not hijack another comment), cut to GitHub's size limit."""
    clean = _MARKER_RE.sub("", body).strip()
    if len(clean) > limit:
        clean = clean[:limit].rstrip() + "\n\n… (cut: the full report is in the run's artifact)"
    return f"{marker(name)}\n{clean}\n"


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str


@dataclass(frozen=True)
class UpsertResult:
    action: str  # "created" or "updated"
    comment_id: int


class CommentSink(Protocol):
    def list_comments(self, pr: int) -> list[Comment]: ...

    def create(self, pr: int, body: str) -> Comment: ...

    def update(self, comment_id: int, body: str) -> Comment: ...


# ---------------------------------------------------------------- GitHub REST API
class GitHubAPI:
    """The few REST calls the workflows need, with a token, JSON bodies and pagination."""

    def __init__(self, api_url: str, repository: str, token: str | None, timeout_s: float = 30.0):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository or ""):
            raise CIError(f"GITHUB_REPOSITORY {repository!r} is not of the form owner/name")
        if not token:
            raise CIError("GITHUB_TOKEN is not set: the step needs `env: GITHUB_TOKEN: ${{ github.token }}`")
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self.token = token
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[object, dict[str, str]]:
        url = path if path.startswith(("http://", "https://")) else f"{self.api_url}/repos/{self.repository}{path}"
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "kernelbench-ci",
            **({"Content-Type": "application/json"} if data is not None else {}),
        })
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
                headers = {k.lower(): v for k, v in resp.headers.items()}
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:300].replace("\n", " ")
            raise CIError(f"GitHub API {method} {urllib.parse.urlsplit(url).path} failed: HTTP {e.code} {detail}") from None
        except (urllib.error.URLError, TimeoutError) as e:
            raise CIError(f"GitHub API {method} {url} unreachable: {getattr(e, 'reason', e)}") from None
        return (json.loads(raw) if raw else None), headers

    def paginate(self, path: str) -> list:
        items: list = []
        sep = "&" if "?" in path else "?"
        url: str | None = f"{path}{sep}per_page=100"
        while url:
            page, headers = self.request("GET", url)
            if not isinstance(page, list):
                raise CIError(f"GitHub API GET {path}: expected a list")
            items += page
            m = _LINK_NEXT.search(headers.get("link", ""))
            url = m.group(1) if m else None
        return items

    def pr_head_sha(self, pr: int) -> str:
        data, _ = self.request("GET", f"/pulls/{int(pr)}")
        sha = (data or {}).get("head", {}).get("sha") if isinstance(data, dict) else None
        if not isinstance(sha, str):
            raise CIError(f"pull request #{pr}: the API response has no head.sha")
        return sha


class GitHubCommentSink:
    def __init__(self, api: GitHubAPI):
        self.api = api

    def list_comments(self, pr: int) -> list[Comment]:
        return [_comment(c) for c in self.api.paginate(f"/issues/{int(pr)}/comments")]

    def create(self, pr: int, body: str) -> Comment:
        data, _ = self.api.request("POST", f"/issues/{int(pr)}/comments", {"body": body})
        return _comment(data)

    def update(self, comment_id: int, body: str) -> Comment:
        data, _ = self.api.request("PATCH", f"/issues/comments/{int(comment_id)}", {"body": body})
        return _comment(data)


def _comment(data: object) -> Comment:
    if not isinstance(data, dict):
        raise CIError("GitHub API: a comment is not a JSON object")
    return Comment(id=int(data["id"]), author=str((data.get("user") or {}).get("login", "")), body=str(data.get("body") or ""))


# ---------------------------------------------------------------- a file, for dry runs
class FileCommentSink:
    """Comments kept in a JSON file ``{"comments": [{"id", "pr", "author", "body"}]}``."""

    def __init__(self, path: str | Path, author: str = BOT_LOGIN):
        self.path = Path(path)
        self.author = author

    def _load(self) -> list[dict]:
        if not self.path.exists():
            return []
        try:
            return list(json.loads(self.path.read_text(encoding="utf-8"))["comments"])
        except (ValueError, KeyError, TypeError) as e:
            raise CIError(f"comment file {self.path} is not a comments record: {e}") from None

    def _save(self, comments: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"comments": comments}, f, indent=1)
        os.replace(tmp, self.path)

    def list_comments(self, pr: int) -> list[Comment]:
        return [Comment(c["id"], c["author"], c["body"]) for c in self._load() if c["pr"] == pr]

    def create(self, pr: int, body: str) -> Comment:
        comments = self._load()
        new = {"id": max((c["id"] for c in comments), default=0) + 1, "pr": pr, "author": self.author, "body": body}
        self._save(comments + [new])
        return Comment(new["id"], self.author, body)

    def update(self, comment_id: int, body: str) -> Comment:
        comments = self._load()
        for c in comments:
            if c["id"] == comment_id:
                c["body"] = body
                self._save(comments)
                return Comment(comment_id, c["author"], body)
        raise CIError(f"comment {comment_id} not found in {self.path}")


def sink_from_env(env: dict[str, str] | None = None) -> CommentSink:
    env = dict(os.environ if env is None else env)
    spec = env.get("KB_COMMENT_SINK", "github") or "github"
    if spec.startswith("file:"):
        return FileCommentSink(spec[len("file:"):])
    if spec != "github":
        raise CIError(f"KB_COMMENT_SINK={spec!r}: use 'github' or 'file:/path/comments.json'")
    return GitHubCommentSink(api_from_env(env))


def api_from_env(env: dict[str, str] | None = None) -> GitHubAPI:
    env = dict(os.environ if env is None else env)
    return GitHubAPI(env.get("GITHUB_API_URL", "https://api.github.com"), env.get("GITHUB_REPOSITORY", ""),
                     env.get("GITHUB_TOKEN"))


def upsert_comment(sink: CommentSink, pr: int, name: str, body: str, bot_login: str = BOT_LOGIN) -> UpsertResult:
    """Edit the bot's comment carrying this marker, or add one; never touches anyone else's comment."""
    full = compose_body(name, body)
    tag = marker(name)
    for c in sink.list_comments(pr):
        if c.author == bot_login and c.body.startswith(tag):
            sink.update(c.id, full)
            return UpsertResult("updated", c.id)
    return UpsertResult("created", sink.create(pr, full).id)
