"""The workflows' own steps, run in order on sample pull requests in a temporary git repository.

Every ``run:`` step executes as written (bash, ``-eo pipefail``) through scripts/ci/local_runner.py;
``uses:`` steps call local stand-ins (checkout from the temporary repository, artifacts in a
folder, a recorded Pages deployment). Comments go to a GitHub REST API stand-in served on
127.0.0.1, so the real posting code runs. The only substitutions: dependency installation is
skipped (the test environment has the package); the official problems the workflows check out are a
local repository in KernelBench's layout, made here from the tiny fixture problems and pinned as the
official set by a manifest written for it (``KERNELBENCH_MANIFEST``, a test seam no workflow sets); and
the evaluate step's runner is the local one (``KB_RUNNER=local``; the workflow's default is Modal).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("yaml")
pytest.importorskip("pydantic")

from fixtures.leaderboard import factory as F  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
sys.path.insert(0, str(ROOT / "scripts" / "ci"))

from local_runner import JobContext, JobRun, load_workflow, run_job, standard_actions  # noqa: E402

REPO = "kb-org/leaderboard"
TOKEN = "ghs_local_test_token"
BOT = "github-actions[bot]"


# ---------------------------------------------------------------- a GitHub REST API stand-in
@dataclass
class FakeGitHub:
    """Pull requests' heads and issue comments, over real HTTP with token checks and pagination."""

    heads: dict[int, str] = field(default_factory=dict)
    comments: list[dict] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    per_page_cap: int = 100

    def on(self, pr: int) -> list[dict]:
        return [c for c in self.comments if c["pr"] == pr]


def _handler(gh: FakeGitHub):
    prefix = f"/repos/{REPO}"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep pytest output clean
            pass

        def _send(self, code: int, body, headers: dict | None = None):
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        def _route(self, method: str):
            url = urllib.parse.urlsplit(self.path)
            gh.requests.append((method, url.path))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._send(401, {"message": "Bad credentials"})
            body = None
            if method in ("POST", "PATCH"):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            path = url.path[len(prefix):] if url.path.startswith(prefix) else None
            if path is None:
                return self._send(404, {"message": "Not Found"})
            if m := re.fullmatch(r"/pulls/(\d+)", path):
                pr = int(m.group(1))
                if method == "GET" and pr in gh.heads:
                    return self._send(200, {"number": pr, "head": {"sha": gh.heads[pr]}, "state": "open"})
            if m := re.fullmatch(r"/issues/(\d+)/comments", path):
                pr = int(m.group(1))
                if method == "GET":
                    q = urllib.parse.parse_qs(url.query)
                    per = min(int(q.get("per_page", ["30"])[0]), gh.per_page_cap)
                    page = int(q.get("page", ["1"])[0])
                    mine = gh.on(pr)
                    chunk = mine[(page - 1) * per: page * per]
                    headers = {}
                    if page * per < len(mine):
                        nxt = f"http://{self.headers['Host']}{prefix}/issues/{pr}/comments?per_page={per}&page={page + 1}"
                        headers["Link"] = f'<{nxt}>; rel="next"'
                    return self._send(200, [_public(c) for c in chunk], headers)
                if method == "POST":
                    c = {"id": 1000 + len(gh.comments), "pr": pr, "user": BOT, "body": body["body"]}
                    gh.comments.append(c)
                    return self._send(201, _public(c))
            if (m := re.fullmatch(r"/issues/comments/(\d+)", path)) and method == "PATCH":
                for c in gh.comments:
                    if c["id"] == int(m.group(1)):
                        if c["user"] != BOT:
                            return self._send(403, {"message": "not yours"})
                        c["body"] = body["body"]
                        return self._send(200, _public(c))
            return self._send(404, {"message": "Not Found"})

        def do_GET(self):
            self._route("GET")

        def do_POST(self):
            self._route("POST")

        def do_PATCH(self):
            self._route("PATCH")

    return Handler


def _public(c: dict) -> dict:
    return {"id": c["id"], "user": {"login": c["user"]}, "body": c["body"]}


@pytest.fixture
def github_api():
    gh = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(gh))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    gh.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield gh
    server.shutdown()
    server.server_close()


# ---------------------------------------------------------------- the sample repository
def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "t@example.org"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass
class Sample:
    origin: Path
    base_sha: str  # the pull requests' base commit
    main_sha: str  # main's tip (after a commit made once the pull requests branched off)
    heads: dict[int, str]


@dataclass
class Upstream:
    """A local stand-in for KernelBench's repository, and the manifest that pins it as the official set."""

    repo: Path
    revision: str
    manifest: Path
    identity: dict


def make_upstream(tmp: Path, level4: bool = False) -> Upstream:
    """``KernelBench/level<N>/`` holding the fixture problems (written for the tests), plus other files;
    with ``level4``, also a level-4 problem shaped like the official ones (it loads a hub model at import
    and leaves a trace when its module body runs)."""
    from fixtures.hub_models import HUB_PROBLEM_NAME, MARKED_HUB_PROBLEM

    from kernelbench.problems import load_directory
    from kernelbench.problems.identity import ProblemSetIdentity, identify, write_manifest

    repo = tmp / "upstream-KernelBench"
    shutil.copytree(F.PROBLEMS_DIR, repo / "KernelBench", ignore=shutil.ignore_patterns("__pycache__"))
    if level4:
        (repo / "KernelBench" / "level4").mkdir()
        (repo / "KernelBench" / "level4" / f"{HUB_PROBLEM_NAME}.py").write_text(MARKED_HUB_PROBLEM)
    (repo / "README.md").write_text("# KernelBench (a stand-in)\n")
    (repo / "src").mkdir()
    (repo / "src" / "not_problems.py").write_text("print('not checked out')\n")
    git(repo, "init", "--quiet", "-b", "main")
    git(repo, "config", "uploadpack.allowAnySHA1InWant", "true")
    revision = commit_all(repo, "problems")
    hashes = identify(load_directory(repo / "KernelBench")).hashes
    pinned = ProblemSetIdentity("kernelbench", revision, hashes)
    write_manifest(pinned, tmp / "manifest.json")
    return Upstream(repo, revision, tmp / "manifest.json", pinned.to_dict())


def incumbent_bundle(sub_path: Path, out_dir: Path, problem_set: dict | None = None) -> None:
    """An entry already on the board (evaluated on this machine's label, CPU)."""
    from leaderboard.bundle import ResultsBundle, write_bundle
    from leaderboard.schema import load_submission

    results = [F.result(1, 1, "1_ReLU", candidate_ms=0.5, ref_ms=1.0, gpu=None),
               F.result(1, 2, "2_Sigmoid", correct=False, gpu=None)]
    write_bundle(ResultsBundle(entry="incumbent", gpu="CPU", submission_sha256=load_submission(sub_path).sha256(),
                               problem_source="test", problem_set=problem_set, runner="local",
                               evaluated_on="2026-01-02", results=results),
                 out_dir)


def make_sample(tmp: Path, problem_set: dict | None = None) -> Sample:
    origin = tmp / "origin"
    origin.mkdir()
    git(origin, "init", "--quiet", "-b", "main")
    git(origin, "config", "uploadpack.allowAnySHA1InWant", "true")
    shutil.copytree(ROOT / "scripts" / "ci", origin / "scripts" / "ci",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / ".github", origin / ".github")
    # The base branch's own code, as a real checkout has it: kb_ci.py puts the checkout's root first on
    # sys.path (leaderboard/ is not in the installed wheel), and official-pin reads the manifest as JSON.
    for package in ("kernelbench", "leaderboard"):
        shutil.copytree(ROOT / package, origin / package, ignore=shutil.ignore_patterns("__pycache__"))
    (origin / "leaderboard" / "exclusions.json").write_text('{"exclusions": []}\n')
    (origin / "submissions").mkdir()
    (origin / "submissions" / "README.md").write_text("# Submissions\n")
    sub = F.write_submission(origin / "submissions" / "incumbent.json", F.submission_dict(
        "Incumbent Model", kernels={"level_1_problem_1_sample_0": F.kernel("triton_relu"),
                                    "level_1_problem_2_sample_0": F.kernel("triton_sigmoid")}))
    incumbent_bundle(sub, origin / "data" / "evaluations", problem_set)
    base_sha = commit_all(origin, "base: one entry on the board")

    git(origin, "checkout", "--quiet", "-b", "pr-1")
    F.write_submission(origin / "submissions" / "sample.json", F.submission_dict(
        "Sample Model", kernels={"level_1_problem_1_sample_0": F.kernel("triton_relu")}, organization="Sample Lab"))
    head1 = commit_all(origin, "add sample")
    git(origin, "checkout", "--quiet", "main")
    git(origin, "checkout", "--quiet", "-b", "pr-2")
    F.write_submission(origin / "submissions" / "bad_entry.json", F.submission_dict("Bad Entry", kernels={
        "level_1_problem_1_sample_0": "import torch\ndef (:\n",
        "level_1_problem_99_sample_0": F.kernel("triton_relu")}))
    F.write_submission(origin / "submissions" / "nested" / "deep.json", F.submission_dict("Deep"))
    (origin / "submissions" / "incumbent.json").unlink()
    head2 = commit_all(origin, "add a bad entry, remove the incumbent")
    git(origin, "checkout", "--quiet", "main")
    # main moves on after the pull requests branched off: this file is not theirs
    F.write_submission(origin / "submissions" / "late.json", F.submission_dict("Late Entry"))
    main_sha = commit_all(origin, "another entry lands on main")
    for n, sha in ((1, head1), (2, head2)):
        git(origin, "update-ref", f"refs/pull/{n}/head", sha)
    return Sample(origin=origin, base_sha=base_sha, main_sha=main_sha, heads={1: head1, 2: head2})


@pytest.fixture
def upstream(tmp_path) -> Upstream:
    return make_upstream(tmp_path)


@pytest.fixture
def sample(tmp_path, upstream) -> Sample:
    return make_sample(tmp_path, upstream.identity)


# ---------------------------------------------------------------- running a job
def _skip_install(step: dict) -> str | None:
    if str(step.get("run", "")).startswith("bash scripts/ci/install.sh"):
        return "the package is already installed in the test environment"
    return None


@dataclass
class Runs:
    tmp: Path
    sample: Sample
    gh: FakeGitHub
    store: Path
    upstream: Upstream
    deployments: list = field(default_factory=list)
    n: int = 0
    #: The repository variables (none: the workflows' defaults, the official set).
    vars: dict = field(default_factory=dict)

    def job(self, workflow: str, job_id: str, event_name: str, event: dict, *, sha: str, inputs: dict | None = None,
            extra_env: dict | None = None, secrets: dict | None = None) -> tuple[JobRun, Path]:
        self.n += 1
        ws = self.tmp / f"ws{self.n}-{job_id}"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GITHUB_", "MODAL_", "KB_", "RUNNER_", "KERNELBENCH_MANIFEST"))}
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env["KERNELBENCH_MANIFEST"] = str(self.upstream.manifest)
        env.update(extra_env or {})
        ctx = JobContext(
            workspace=ws, runner_temp=self.tmp / f"rt{self.n}",
            github={"event_name": event_name, "event": event, "sha": sha, "ref": "refs/heads/main",
                    "repository": REPO, "run_id": str(7000 + self.n), "server_url": "https://github.com",
                    "api_url": self.gh.url, "token": TOKEN, "actor": "maintainer"},
            actions=standard_actions(self.sample.origin, self.store, self.deployments,
                                     repositories={"ScalingIntelligence/KernelBench": self.upstream.repo}),
            inputs=inputs or {}, vars=dict(self.vars),
            secrets=secrets or {}, base_env=env, skip_step=_skip_install, step_timeout_s=600,
        )
        return run_job(load_workflow(WORKFLOWS / workflow), job_id, ctx), ws


@pytest.fixture
def runs(tmp_path, sample, github_api, upstream) -> Runs:
    github_api.heads.update(sample.heads)
    store = tmp_path / "artifacts"
    store.mkdir()
    return Runs(tmp=tmp_path, sample=sample, gh=github_api, store=store, upstream=upstream)


def pr_event(sample: Sample, n: int, **extra) -> dict:
    return {"number": n, "pull_request": {"number": n, "head": {"sha": sample.heads[n]},
                                          "base": {"sha": sample.main_sha, "ref": "main"}}, **extra}


def validate_then_comment(runs: Runs, n: int) -> tuple[JobRun, JobRun]:
    s = runs.sample
    v, _ = runs.job("validate.yml", "validate", "pull_request", pr_event(s, n), sha=s.heads[n])
    c, _ = runs.job("comment.yml", "comment", "workflow_run", {"workflow_run": {
        "id": 7000 + runs.n, "event": "pull_request", "head_sha": s.heads[n],
        "conclusion": v.status}}, sha=s.main_sha)
    return v, c


# ---------------------------------------------------------------- validate + comment
def test_validate_and_comment_on_a_good_pull_request(runs):
    v, c = validate_then_comment(runs, 1)
    assert v.status == "success", v.log
    assert v.step("Install").outcome == "skipped"
    assert "1 submission file(s) added or changed, 0 removed" in v.step("changed").log
    assert "late.json" not in v.step("changed").log  # landed on main after the branch: not this PR's
    assert "✅ KernelBench submission check passed" in v.summary and "sample.json" in v.summary
    report = runs.store / "validate-report"
    assert json.loads((report / "pr.json").read_text()) == {"pr": 1, "head_sha": runs.sample.heads[1], "n_deleted": 0}
    assert json.loads((report / "validate.json").read_text())["passed"] is True

    assert c.status == "success", c.log
    (comment,) = runs.gh.on(1)
    assert comment["body"].startswith("<!-- kernelbench:validate -->\n## ✅ KernelBench submission check passed")
    assert "`sample.json`" in comment["body"] and "Sample Model" in comment["body"]
    assert f"commit `{runs.sample.heads[1][:12]}`" in comment["body"]
    assert runs.gh.on(2) == []

    # the same report again (e.g. a re-run) edits the comment instead of adding one
    c2, _ = runs.job("comment.yml", "comment", "workflow_run", {"workflow_run": {
        "id": 1, "event": "pull_request", "head_sha": runs.sample.heads[1], "conclusion": "success"}},
        sha=runs.sample.main_sha)
    assert c2.status == "success" and "updated comment" in c2.step("Post or update the comment").log
    assert len(runs.gh.on(1)) == 1 and ("PATCH", f"/repos/{REPO}/issues/comments/{comment['id']}") in runs.gh.requests


def test_validate_reports_every_problem_of_a_bad_pull_request(runs):
    v, c = validate_then_comment(runs, 2)
    assert v.status == "failure"
    assert v.step("Validate").outcome == "failure"
    assert v.step("Job summary").outcome == "success" and v.step("Upload the report").outcome == "success"
    for text in ("failed with", "bad_entry.json", "not valid Python", "level 1 has no problem 99",
                 "submissions/nested/deep.json", "not in a sub-folder", "1 submission file(s) removed"):
        assert text in v.summary, text
    assert c.status == "success", c.log
    (comment,) = runs.gh.on(2)
    assert comment["body"].startswith("<!-- kernelbench:validate -->\n## ❌ KernelBench submission check failed")
    assert "not valid Python" in comment["body"]


def test_comment_refuses_a_report_that_names_another_pull_request(runs):
    """The report comes from the pull request's own run: PR 2 claiming to be PR 1 posts nothing."""
    s = runs.sample
    v, _ = runs.job("validate.yml", "validate", "pull_request", pr_event(s, 2), sha=s.heads[2])
    pr_json = runs.store / "validate-report" / "pr.json"
    pr_json.write_text(json.dumps({"pr": 1, "head_sha": s.heads[2]}))
    c, _ = runs.job("comment.yml", "comment", "workflow_run", {"workflow_run": {
        "id": 1, "event": "pull_request", "head_sha": s.heads[2], "conclusion": "failure"}}, sha=s.main_sha)
    assert c.status == "success", c.log
    assert "no comment posted" in c.step("Post or update the comment").log
    assert runs.gh.comments == []
    # and a report whose pr.json names another commit than the run's is refused outright
    pr_json.write_text(json.dumps({"pr": 2, "head_sha": s.heads[1]}))
    c, _ = runs.job("comment.yml", "comment", "workflow_run", {"workflow_run": {
        "id": 1, "event": "pull_request", "head_sha": s.heads[2], "conclusion": "failure"}}, sha=s.main_sha)
    assert c.status == "failure" and "not the run's" in c.log
    assert runs.gh.comments == []


# ---------------------------------------------------------------- evaluate
SECRETS = {"MODAL_TOKEN_ID": "ak-test-id", "MODAL_TOKEN_SECRET": "as-test-secret"}


def labelled(runs: Runs, n: int, label: str = "evaluate", head: str | None = None) -> tuple[JobRun, Path]:
    s = runs.sample
    event = pr_event(s, n, action="labeled", label={"name": label})
    if head:
        event["pull_request"]["head"]["sha"] = head
    return runs.job("evaluate.yml", "evaluate", "pull_request_target", event, sha=s.main_sha,
                    extra_env={"KB_RUNNER": "local"}, secrets=SECRETS)


def test_evaluate_ignores_other_labels(runs):
    job, _ = labelled(runs, 1, label="documentation")
    assert job.status == "skipped" and job.steps == []
    assert runs.gh.comments == []


def test_evaluate_refuses_a_pull_request_that_moved_after_the_label(runs):
    job, ws = labelled(runs, 1, head=runs.sample.base_sha)
    assert job.status == "failure"
    assert job.step("fetch").outcome == "failure" and "changed after the label was added" in job.step("fetch").log
    assert job.step("Evaluate on Modal").outcome == "skipped"
    (comment,) = runs.gh.on(1)
    assert comment["body"].startswith("<!-- kernelbench:evaluate -->\n## ❌ KernelBench evaluation did not finish (failure)")
    assert not (runs.store / "evaluation-pr-1").exists()  # nothing was read, so nothing to upload


def test_evaluate_by_hand_refuses_an_invalid_submission_without_evaluating(runs):
    s = runs.sample
    job, ws = runs.job("evaluate.yml", "evaluate", "workflow_dispatch", {"inputs": {"pr_number": "2", "gpu": "L40S"}},
                       sha=s.main_sha, inputs={"pr_number": "2", "gpu": "L40S"}, extra_env={"KB_RUNNER": "local"},
                       secrets=SECRETS)
    assert job.status == "failure"
    assert job.step("Validate").outcome == "failure" and job.step("Evaluate on Modal").outcome == "skipped"
    (comment,) = runs.gh.on(2)
    body = comment["body"]
    assert "did not pass validation, so nothing was evaluated" in body and "not valid Python" in body
    art = runs.store / "evaluation-pr-2"
    assert (art / "validation" / "validate.json").exists()
    manifest = json.loads((art / "validation" / "manifest.json").read_text())
    assert manifest["head_sha"] == s.heads[2] and manifest["deleted"] == ["submissions/incumbent.json"]
    # the trusted checkout never received the pull request's files
    assert git(ws, "rev-parse", "HEAD") == s.main_sha
    assert not (ws / "submissions" / "bad_entry.json").exists() and (ws / "submissions" / "incumbent.json").exists()


# ---------------------------------------------------------------- the whole path
@pytest.mark.slow
def test_pull_request_to_published_site(runs):
    """validate -> comment -> label -> evaluate (local runner, CPU) -> merge -> publish to Pages."""
    s = runs.sample
    v, c = validate_then_comment(runs, 1)
    assert v.status == c.status == "success"

    job, ws = labelled(runs, 1)
    assert job.status == "success", job.log
    assert f"pull request #1 at {s.heads[1][:12]}: 1 submission file(s) copied" in job.step("fetch").log
    comments = {c["body"].split("\n", 1)[0]: c for c in runs.gh.on(1)}
    assert set(comments) == {"<!-- kernelbench:validate -->", "<!-- kernelbench:evaluate -->"}
    body = comments["<!-- kernelbench:evaluate -->"]["body"]
    assert "## ✅ KernelBench evaluation: `sample` on `CPU`" in body
    assert "**Sample Model**" in body and "1 kernel(s) evaluated" in body
    assert "| level 1 | 4 | 1 | 1 (25.0%) | 0.0% | 0.0% | n/a | 1.000 |" in body
    assert "| **overall** | 6 | 1 | 1 (16.7%) | 0.0% | 0.0% | n/a | 1.000 |" in body
    # the CPU path measures no speedup (full-deck 1.0); the incumbent's one 2x kernel gives 2^(1/6)
    assert "Rank on `CPU` once merged: **#2 of 2** (by full-deck geomean) · audit: **clean**" in body
    assert "| `level_1_problem_1_sample_0` | correct |" in body
    assert "copy `evaluations/sample__CPU.json` from the artifact" in body and "artifact `evaluation-pr-1`" in body

    art = runs.store / "evaluation-pr-1"
    bundle = json.loads((art / "evaluations" / "sample__CPU.json").read_text())
    assert [(r["level"], r["problem_id"], r["correct"]) for r in bundle["results"]] == [(1, 1, True)]
    assert (art / "runs" / "sample_CPU_level1" / "level_1_problem_1_sample_0_kernel.py").exists()
    assert (art / "comment.md").read_text() == body.split("\n", 1)[1]
    assert job.summary == (art / "comment.md").read_text()
    # the kernels never entered the trusted checkout; HEAD is still main
    assert git(ws, "rev-parse", "HEAD") == s.main_sha and not (ws / "submissions" / "sample.json").exists()

    # a maintainer merges and commits the bundle from the artifact; main's push publishes the site
    git(s.origin, "merge", "--quiet", "--no-ff", "-m", "Merge pull request #1", "pr-1")
    shutil.copy(art / "evaluations" / "sample__CPU.json", s.origin / "data" / "evaluations")
    merged = commit_all(s.origin, "results of sample on CPU")
    build, bws = runs.job("publish.yml", "build", "push", {"ref": "refs/heads/main"}, sha=merged)
    assert build.status == "success", build.log
    deploy, _ = runs.job("publish.yml", "deploy", "push", {"ref": "refs/heads/main"}, sha=merged,
                         extra_env={})
    assert deploy.status == "success", deploy.log
    (dep,) = runs.deployments
    site = Path(dep["artifact"])
    index = (site / "index.html").read_text()
    assert "Sample Model" in index and "Incumbent Model" in index and "Late Entry" in index
    assert (site / "entries" / "sample__CPU.html").exists()
    assert deploy.step("deployment").outputs["page_url"] == "https://kb-org.github.io/leaderboard/"


def test_publish_builds_and_deploys_the_site(runs):
    """publish on its own, after a merge whose bundle and data/ were committed together."""
    s = runs.sample
    git(s.origin, "merge", "--quiet", "--no-ff", "-m", "Merge pull request #1", "pr-1")
    from leaderboard.bundle import ResultsBundle, write_bundle
    from leaderboard.schema import load_submission

    sub = load_submission(s.origin / "submissions" / "sample.json")
    write_bundle(ResultsBundle(entry="sample", gpu="CPU", submission_sha256=sub.sha256(), problem_source="test",
                               problem_set=runs.upstream.identity, runner="local", evaluated_on="2026-02-03",
                               results=[F.result(1, 1, "1_ReLU", candidate_ms=0.25, ref_ms=1.0, gpu=None)]),
                 s.origin / "data" / "evaluations")
    merged = commit_all(s.origin, "results of sample")
    build, _ = runs.job("publish.yml", "build", "workflow_dispatch", {}, sha=merged)
    assert build.status == "success", build.log
    # the official set, checked out at the pinned commit and checked against the manifest
    assert f"problem set kernelbench@{runs.upstream.revision}: 6 problems (level 1: 4, level 2: 2)" in \
        build.step("Check the problem set").log
    assert (runs.store / "github-pages" / "index.html").exists()
    deploy, _ = runs.job("publish.yml", "deploy", "workflow_dispatch", {}, sha=merged)
    assert deploy.status == "success", deploy.log
    index = (Path(runs.deployments[0]["artifact"]) / "index.html").read_text()
    # sample (4x) ranks above the incumbent (2x on one problem)
    assert index.index("Sample Model") < index.index("Incumbent Model")


@pytest.mark.slow
def test_a_level_4_entry_from_pull_request_to_its_own_board(tmp_path, github_api):
    """An official set with a level 4 (a problem that loads a hub model at import): validation accepts the
    level-4 kernel without running the problem, the evaluation (local runner, the model in HF_HUB_CACHE)
    scores it on its own board in the comment, and the published site has that board apart."""
    pytest.importorskip("transformers")
    from fixtures.hub_models import IMPORT_MARKER_ENV, TRITON_HUB_KERNEL, hub_cache_with_tiny_model

    upstream = make_upstream(tmp_path, level4=True)
    s = make_sample(tmp_path, upstream.identity)
    git(s.origin, "checkout", "--quiet", "-b", "pr-3", s.base_sha)
    F.write_submission(s.origin / "submissions" / "hub_entry.json", F.submission_dict("Hub Entry", kernels={
        "level_1_problem_1_sample_0": F.kernel("triton_relu"), "level_4_problem_1_sample_0": TRITON_HUB_KERNEL}))
    s.heads[3] = commit_all(s.origin, "add an entry with a level-4 kernel")
    git(s.origin, "update-ref", "refs/pull/3/head", s.heads[3])
    git(s.origin, "checkout", "--quiet", "main")
    github_api.heads.update(s.heads)
    store = tmp_path / "artifacts"
    store.mkdir()
    runs = Runs(tmp=tmp_path, sample=s, gh=github_api, store=store, upstream=upstream)
    markers = {job: tmp_path / f"ran-during-{job}" for job in ("validate", "publish")}

    v, _ = runs.job("validate.yml", "validate", "pull_request", pr_event(s, 3), sha=s.heads[3],
                    extra_env={IMPORT_MARKER_ENV: str(markers["validate"])})
    assert v.status == "success", v.log
    assert (f"problem set kernelbench@{upstream.revision}: 7 problems (level 1: 4, level 2: 2, "
            "level 4: 1 (own board))") in v.step("Check the problem set").log
    assert (tmp_path / "ws1-validate" / "kernelbench-official" / "KernelBench" / "level4").is_dir()
    assert "Level 4 (own board)" in v.summary and "Level 4 is a board of its own" in v.summary
    report = json.loads((store / "validate-report" / "validate.json").read_text())
    assert report["separate_levels"] == ["4"]
    assert any(i["code"] == "needs-hub" for i in report["files"][0]["issues"])
    assert not markers["validate"].exists()  # read and hashed, never run

    cache = hub_cache_with_tiny_model(tmp_path / "hf")
    job, _ = runs.job("evaluate.yml", "evaluate", "pull_request_target", pr_event(
        s, 3, action="labeled", label={"name": "evaluate"}), sha=s.main_sha, secrets=SECRETS,
        extra_env={"KB_RUNNER": "local", "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})
    assert job.status == "success", job.log
    (body,) = [c["body"] for c in github_api.on(3) if c["body"].startswith("<!-- kernelbench:evaluate -->")]
    assert "| **overall** | 6 | 1 | 1 (16.7%) |" in body
    assert "| level 4 (own board, not in overall) | 1 | 1 | 1 (100.0%) |" in body
    assert "Level 4 is a board of its own (Hugging Face models), not in the overall score: rank on `CPU` there " \
           "once merged: **#1 of 1**" in body
    assert "| `level_4_problem_1_sample_0` | correct |" in body

    git(s.origin, "merge", "--quiet", "--no-ff", "-m", "Merge pull request #3", "pr-3")
    shutil.copy(store / "evaluation-pr-3" / "evaluations" / "hub_entry__CPU.json", s.origin / "data" / "evaluations")
    merged = commit_all(s.origin, "results of hub_entry on CPU")
    build, _ = runs.job("publish.yml", "build", "push", {"ref": "refs/heads/main"}, sha=merged,
                        extra_env={IMPORT_MARKER_ENV: str(markers["publish"])})
    assert build.status == "success", build.log
    site = store / "github-pages"
    level4 = (site / "gpu" / "CPU" / "level4.html").read_text()
    assert "Level 4 (Hugging Face models), not in the overall score" in level4
    assert 'data-entry="hub_entry"' in level4 and 'data-entry="incumbent"' not in level4
    assert "Not attempted (no level-4 kernel, so not listed): Incumbent Model." in level4
    assert json.loads((site / "gpu" / "CPU" / "level4.json").read_text())["in_overall"] is False
    index = (site / "index.html").read_text()
    assert 'data-entry="hub_entry"' in index and 'data-entry="incumbent"' in index and "6 problems" in index
    assert not markers["publish"].exists()


# ---------------------------------------------------------------- the problem set
def test_the_workflows_check_out_the_official_problems_at_the_pinned_commit(runs):
    v, _ = runs.job("validate.yml", "validate", "pull_request", pr_event(runs.sample, 1), sha=runs.sample.heads[1])
    assert v.status == "success", v.log
    pin = v.step("pin")
    assert pin.outputs == {"checkout": "true", "revision": runs.upstream.revision, "path": "kernelbench-official"}
    checkout = v.step("Check out the official problems")
    assert checkout.outcome == "success" and checkout.outputs["commit"] == runs.upstream.revision
    ws = runs.tmp / "ws1-validate"
    official = ws / "kernelbench-official"
    assert (official / "KernelBench" / "level1" / "1_ReLU.py").is_file()
    assert not (official / "src").exists()  # only the problems (sparse checkout)
    assert f"problem set kernelbench@{runs.upstream.revision}: 6 problems (level 1: 4, level 2: 2)" in \
        v.step("Check the problem set").log
    report = json.loads((runs.store / "validate-report" / "validate.json").read_text())
    assert report["problem_source"] == f"kernelbench:{official.resolve()}"


def test_a_checkout_that_does_not_hash_as_pinned_stops_the_job_before_anything_is_validated(runs):
    """The manifest pins other problems than the commit holds (or the other way round): one error."""
    pinned = json.loads(runs.upstream.manifest.read_text())
    pinned["hashes"]["level2/1_Linear_ReLU.py"] = "0" * 32
    runs.upstream.manifest.write_text(json.dumps(pinned))
    v, _ = runs.job("validate.yml", "validate", "pull_request", pr_event(runs.sample, 1), sha=runs.sample.heads[1])
    assert v.status == "failure"
    step = v.step("Check the problem set")
    assert step.outcome == "failure"
    assert "does not hash the same as kernelbench@" in step.log and "level2/1_Linear_ReLU.py" in step.log
    assert "Traceback" not in step.log
    assert v.step("Validate").outcome == "skipped"
    assert not (runs.store / "validate-report" / "validate.json").exists()


def test_a_manifest_pinning_a_commit_the_repository_lacks_fails_at_the_checkout(runs):
    pinned = json.loads(runs.upstream.manifest.read_text())
    pinned["revision"] = "1" * 40
    runs.upstream.manifest.write_text(json.dumps(pinned))
    v, _ = runs.job("validate.yml", "validate", "pull_request", pr_event(runs.sample, 1), sha=runs.sample.heads[1])
    assert v.status == "failure" and v.step("Check out the official problems").outcome == "failure"
    assert v.step("Validate").outcome == "skipped"


def test_the_builtin_demo_board_needs_no_checkout(runs):
    """A maintainer who sets KB_SOURCE=builtin (the offline demo) gets no checkout of KernelBench."""
    runs.vars = {"KB_SOURCE": "builtin"}
    v, ws = runs.job("validate.yml", "validate", "pull_request", pr_event(runs.sample, 1), sha=runs.sample.heads[1])
    assert v.status == "success", v.log
    assert v.step("pin").outputs["checkout"] == "false"
    assert v.step("Check out the official problems").outcome == "skipped"
    assert not (ws / "kernelbench-official").exists()
    from kernelbench import __version__

    assert f"problem set builtin@{__version__}: 50 problems" in v.step("Check the problem set").log
