"""The CI step scripts (scripts/ci) and the local workflow runner, piece by piece."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.leaderboard import factory as F
from test_workflows_run import BOT, REPO, TOKEN, commit_all, git, github_api, make_upstream  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "ci"))

import ci_git  # noqa: E402
import kb_ci  # noqa: E402
from ci_github import (  # noqa: E402
    CIError,
    FileCommentSink,
    GitHubAPI,
    GitHubCommentSink,
    compose_body,
    marker,
    sink_from_env,
    upsert_comment,
)
from local_runner import (  # noqa: E402
    JobContext,
    WorkflowError,
    _parse_kv_file,
    condition,
    evaluate,
    interpolate,
    run_job,
)


# ---------------------------------------------------------------- comments
def test_compose_body_strips_our_markers_and_caps_the_size():
    hostile = "hi <!-- kernelbench:evaluate --> there <!--KernelBench other-->\n" + "x" * 100
    body = compose_body("validate", hostile, limit=40)
    assert body.startswith("<!-- kernelbench:validate -->\nhi  there")
    assert body.count("<!--") == 1 and "kernelbench:evaluate" not in body
    assert "(cut: the full report is in the run's artifact)" in body and len(body) < 40 + 120
    with pytest.raises(CIError, match="marker name"):
        marker("Bad Name")


def test_upsert_edits_only_the_bots_comment_with_the_marker(tmp_path):
    sink = FileCommentSink(tmp_path / "c.json")
    human = FileCommentSink(tmp_path / "c.json", author="someone")
    human.create(5, "<!-- kernelbench:validate -->\nI copied the marker")
    sink.create(5, "<!-- kernelbench:evaluate -->\nscores")
    first = upsert_comment(sink, 5, "validate", "report one")
    assert first.action == "created"
    again = upsert_comment(sink, 5, "validate", "report two")
    assert (again.action, again.comment_id) == ("updated", first.comment_id)
    bodies = {c.id: (c.author, c.body) for c in sink.list_comments(5)}
    assert bodies[1] == ("someone", "<!-- kernelbench:validate -->\nI copied the marker")
    assert bodies[2][1].startswith("<!-- kernelbench:evaluate -->")
    assert bodies[first.comment_id] == (BOT, "<!-- kernelbench:validate -->\nreport two\n")
    assert sink.list_comments(6) == []


def test_sink_from_env(tmp_path):
    assert isinstance(sink_from_env({"KB_COMMENT_SINK": f"file:{tmp_path}/x.json"}), FileCommentSink)
    with pytest.raises(CIError, match="KB_COMMENT_SINK"):
        sink_from_env({"KB_COMMENT_SINK": "slack"})
    with pytest.raises(CIError, match="GITHUB_TOKEN is not set"):
        sink_from_env({"GITHUB_REPOSITORY": REPO})
    with pytest.raises(CIError, match="owner/name"):
        sink_from_env({"GITHUB_REPOSITORY": "nope", "GITHUB_TOKEN": "t"})


def test_github_sink_follows_pagination_and_reports_http_errors(github_api):  # noqa: F811
    github_api.per_page_cap = 2
    for i in range(4):
        github_api.comments.append({"id": 10 + i, "pr": 3, "user": "someone", "body": f"c{i}"})
    github_api.comments.append({"id": 20, "pr": 3, "user": BOT, "body": "<!-- kernelbench:validate -->\nold"})
    sink = GitHubCommentSink(GitHubAPI(github_api.url, REPO, TOKEN))
    assert [c.id for c in sink.list_comments(3)] == [10, 11, 12, 13, 20]  # three pages
    assert upsert_comment(sink, 3, "validate", "new").comment_id == 20
    assert github_api.comments[-1]["body"] == "<!-- kernelbench:validate -->\nnew\n"
    with pytest.raises(CIError, match="HTTP 401 .*Bad credentials"):
        GitHubAPI(github_api.url, REPO, "wrong").pr_head_sha(1)
    with pytest.raises(CIError, match="HTTP 404"):
        GitHubAPI(github_api.url, REPO, TOKEN).pr_head_sha(99)


def test_pull_request_numbers_are_checked():
    assert kb_ci._pr_number("12") == 12 and kb_ci._pr_number(3) == 3
    for bad in ("0", "-1", "1; rm -rf /", "", None, True, 1.5, "0x10"):
        with pytest.raises(CIError):
            kb_ci._pr_number(bad)


def test_post_comment_with_no_body_posts_what_failed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KB_COMMENT_SINK", f"file:{tmp_path}/c.json")
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    vdir = tmp_path / "validation"
    vdir.mkdir()
    (vdir / "validate.json").write_text(json.dumps({"passed": False}))
    (vdir / "report.md").write_text("## ❌ KernelBench submission check failed with 1 error\n")
    rc = kb_ci.main(["post-comment", "--marker", "evaluate", "--pr", "4", "--body", str(tmp_path / "none.md"),
                     "--failure-of", "evaluation", "--job-status", "failure", "--head-sha", "a" * 40,
                     "--validation-dir", str(vdir)])
    assert rc == 0 and "created comment 1 on pull request #4" in capsys.readouterr().out
    (c,) = FileCommentSink(tmp_path / "c.json").list_comments(4)
    assert c.body.startswith("<!-- kernelbench:evaluate -->\n## ❌ KernelBench evaluation did not finish (failure)")
    assert "nothing was evaluated" in c.body and "check failed with 1 error" in c.body
    assert "commit `aaaaaaaaaaaa`" in c.body and "https://github.com/kb-org/leaderboard/actions/runs/42" in c.body
    rc = kb_ci.main(["post-comment", "--marker", "evaluate", "--pr", "4", "--body", str(tmp_path / "none.md")])
    assert rc == 2 and "does not exist and no --failure-of" in capsys.readouterr().err


# ---------------------------------------------------------------- git
@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "--quiet", "-b", "main")
    (r / "submissions").mkdir()
    (r / "submissions" / "README.md").write_text("x\n")
    F.write_submission(r / "submissions" / "old.json", F.submission_dict("Old"))
    F.write_submission(r / "submissions" / "gone.json", F.submission_dict("Gone"))
    base = commit_all(r, "base")
    git(r, "checkout", "--quiet", "-b", "pr")
    F.write_submission(r / "submissions" / "new.json", F.submission_dict("New"))
    F.write_submission(r / "submissions" / "old.json", F.submission_dict("Old, updated"))
    (r / "submissions" / "gone.json").unlink()
    (r / "submissions" / "README.md").write_text("changed\n")
    (r / "submissions" / "link.json").symlink_to("/etc/hostname")
    (r / "submissions" / "big.json").write_text(json.dumps({"pad": "x" * 5000}))
    head = commit_all(r, "pr")
    git(r, "checkout", "--quiet", "main")
    F.write_submission(r / "submissions" / "later.json", F.submission_dict("Later"))
    main = commit_all(r, "main moves on")
    git(r, "update-ref", "refs/pull/8/head", head)
    return r, base, head, main


def test_changed_submissions_are_the_pull_requests_own(repo):
    r, base, head, main = repo
    ch = ci_git.changed_submissions(r, main, head)
    assert ch.base == base and ch.head == head
    assert ch.changed == ["submissions/big.json", "submissions/link.json", "submissions/new.json",
                          "submissions/old.json"]
    assert ch.deleted == ["submissions/gone.json"]


def test_export_copies_blobs_without_touching_the_checkout(repo, tmp_path):
    r, base, head, main = repo
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(r), str(clone)], check=True)
    fetched = ci_git.fetch_pr_head(clone, 8)
    assert fetched == head
    with pytest.raises(CIError, match="changed after the label was added"):
        ci_git.fetch_pr_head(clone, 8, expected_sha=base)
    ch = ci_git.changed_submissions(clone, "HEAD", fetched)
    out = tmp_path / "untrusted"
    ex = ci_git.export_blobs(clone, fetched, [*ch.changed, "submissions/../x.json", "submissions/.hidden.json"], out,
                             max_bytes=2000)
    assert ex.written == ["submissions/new.json", "submissions/old.json"]
    assert set(ex.refused) == {"submissions/big.json", "submissions/link.json", "submissions/../x.json",
                               "submissions/.hidden.json"}
    assert "over the 2000-byte limit" in ex.refused["submissions/big.json"]
    assert "symbolic link" in ex.refused["submissions/link.json"]
    assert json.loads((out / "submissions" / "old.json").read_text())["metadata"]["display_name"] == "Old, updated"
    assert git(clone, "rev-parse", "HEAD") == main and git(clone, "status", "--porcelain") == ""
    assert not (clone / "submissions" / "new.json").exists()
    with pytest.raises(CIError, match="not a full 40-character"):
        ci_git.export_blobs(clone, "HEAD", [], out)


def test_fetch_and_validate_subcommands(repo, tmp_path, monkeypatch, capsys):
    r, base, head, main = repo
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(r), str(clone)], check=True)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out.txt"))
    monkeypatch.chdir(clone)
    assert kb_ci.main(["fetch", "--pr", "8", "--out", str(tmp_path / "u")]) == 0
    assert _parse_kv_file(tmp_path / "out.txt") == {"head_sha": head, "count": "4"}
    assert kb_ci.main(["fetch", "--pr", "8", "--out", str(tmp_path / "u")]) == 2  # not a fresh folder
    rc = kb_ci.main(["validate", "--files-from", str(tmp_path / "u" / "changed.txt"), "--root", str(tmp_path / "u"),
                     "--manifest", str(tmp_path / "u" / "manifest.json"), "--report-dir", str(tmp_path / "rep"),
                     "--source", "directory", "--path", str(F.PROBLEMS_DIR)])
    assert rc == 1
    report = json.loads((tmp_path / "rep" / "validate.json").read_text())
    verdicts = {f["path"]: f["passed"] for f in report["files"]}
    assert verdicts == {"submissions/big.json": False, "submissions/link.json": False,
                        "submissions/new.json": True, "submissions/old.json": True}
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "1 submission file(s) removed" in md and f"commit `{head[:12]}`" in md
    assert json.loads((tmp_path / "rep" / "pr.json").read_text()) == {"pr": 8, "head_sha": head, "n_deleted": 1}

    (tmp_path / "empty.txt").write_text("")
    assert kb_ci.main(["validate", "--files-from", str(tmp_path / "empty.txt"), "--report-dir",
                       str(tmp_path / "rep2")]) == 0
    assert "no submission file to check" in (tmp_path / "rep2" / "report.md").read_text()


# ---------------------------------------------------------------- the local runner's expressions
CTX = {"github": {"event": {"label": {"name": "Evaluate"}, "pull_request": {"number": 7}}, "sha": "abc"},
       "inputs": {"gpu": ""}, "vars": {}, "env": {"PR": "7"}, "steps": {"s": {"outputs": {"n": "3"}}}}


@pytest.mark.parametrize("expr, value", [
    ("github.event.pull_request.number || inputs.pr_number", 7),
    ("github.event.issue.number || 'none'", "none"),
    ("inputs.gpu || vars.KB_EVAL_GPU || 'H100'", "H100"),
    ("github.event.label.name == 'evaluate'", True),
    ("github.event_name == 'workflow_dispatch' || github.event.label.name == 'evaluate'", True),
    ("github.event.label.name != 'evaluate' && 'x'", False),
    ("steps.s.outputs.n == 3", True),
    ("steps.s.outputs.n > 2 && steps.s.outputs.n < '4'", True),
    ("!contains(fromJSON('[\"a\", \"b\"]'), 'B')", False),
    ("contains('Hello', 'ELL')", True),
    ("format('{0}-{1}-{{x}}', env.PR, 'y')", "7-y-{x}"),
    ("startsWith(github['sha'], 'AB')", True),
    ("github.event.missing.deeper", None),
    ("'it''s'", "it's"),
    ("null == false", True),  # mismatched types compare as numbers: 0 == 0
    ("(1 == 1) && !(2 == 3)", True),
])
def test_expressions(expr, value):
    assert evaluate(expr, CTX) == value


def test_interpolation_and_conditions():
    assert interpolate("pr-${{ env.PR }}-${{ inputs.gpu || 'H100' }}", CTX) == "pr-7-H100"
    assert interpolate("${{ github.event.pull_request.number }}", CTX) == 7
    ok, failed = {"failed": False}, {"failed": True}
    assert condition(None, CTX, ok) and not condition(None, CTX, failed)
    assert condition("always()", CTX, failed) and condition("${{ failure() }}", CTX, failed)
    assert not condition("env.PR == '7'", CTX, failed) and condition("env.PR == '7'", CTX, ok)
    with pytest.raises(WorkflowError, match="hashfiles"):
        evaluate("hashFiles('x')", CTX)
    with pytest.raises(WorkflowError):
        evaluate("github.event ==", CTX)


def test_run_job_semantics(tmp_path):
    workflow = {"env": {"TOP": "t"}, "jobs": {"j": {
        "env": {"GREETING": "${{ format('hi-{0}', env.TOP) }}"},
        "outputs": {"word": "${{ steps.one.outputs.word }}"},
        "steps": [
            {"id": "one", "run": 'echo "word=$GREETING" >> "$GITHUB_OUTPUT"\n'
                                 'printf "multi<<EOF\\na\\nb\\nEOF\\n" >> "$GITHUB_OUTPUT"\necho "LATER=x" >> "$GITHUB_ENV"'},
            {"name": "uses outputs", "env": {"W": "${{ steps.one.outputs.word }}"},
             "run": 'test "$W" = hi-t && test "$LATER" = x && echo "## summary" >> "$GITHUB_STEP_SUMMARY"'},
            {"name": "soft fail", "continue-on-error": True, "run": "exit 3"},
            {"name": "hard fail", "run": "false"},
            {"name": "skipped after failure", "run": "echo never"},
            {"name": "always", "if": "always()", "run": "echo ran"},
            {"name": "on failure", "if": "failure()", "uses": "local/thing@v1", "with": {"x": "${{ env.TOP }}"}},
        ]}}}
    seen = []
    before = dict(os.environ)
    ctx = JobContext(workspace=tmp_path / "ws", runner_temp=tmp_path / "rt", github={"repository": REPO},
                     actions={"local/thing": lambda inputs, st: seen.append(inputs) or {"done": "yes"}})
    run = run_job(workflow, "j", ctx)
    assert run.status == "failure"
    assert [s.outcome for s in run.steps] == ["success", "success", "failure", "failure", "skipped", "success",
                                              "success"]
    assert run.step("one").outputs == {"word": "hi-t", "multi": "a\nb"}
    assert run.outputs == {"word": "hi-t"} and run.summary == "## summary\n"
    assert seen == [{"x": "t"}] and run.step("on failure").outputs == {"done": "yes"}
    assert "exit 3" in run.step("soft fail").log
    with pytest.raises(WorkflowError, match="no local stand-in"):
        run_job({"jobs": {"k": {"steps": [{"uses": "other/action@v2"}]}}}, "k", ctx)
    assert dict(os.environ) == before  # the runner never changes this process's environment


def test_post_comment_needs_only_the_standard_library(tmp_path):
    """comment.yml runs it on a bare Python: no site-packages (-S), no project on the path (-I)."""
    body = tmp_path / "report.md"
    body.write_text("## report\n")
    env = {"PATH": os.environ.get("PATH", ""), "KB_COMMENT_SINK": f"file:{tmp_path}/c.json"}
    proc = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "scripts" / "ci" / "kb_ci.py"), "post-comment",
                           "--marker", "validate", "--pr", "3", "--body", str(body)],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    (c,) = FileCommentSink(tmp_path / "c.json").list_comments(3)
    assert c.body == "<!-- kernelbench:validate -->\n## report\n"


@pytest.mark.parametrize("sub", ["changed", "fetch", "validate", "score", "post-comment", "official-pin",
                                 "problems"])
def test_every_subcommand_has_help(sub, capsys):
    with pytest.raises(SystemExit) as e:
        kb_ci.main([sub, "--help"])
    assert e.value.code == 0 and f"kb_ci.py {sub}" in capsys.readouterr().out


def test_validation_comment_is_rendered_by_base_code_from_the_json_report(tmp_path):
    """The comment job posts Markdown it renders itself from validate.json, on a bare Python (-I -S).

    A report.md beside it (the pull request's code could have written it) is never posted, the
    totals in the JSON are recomputed from its issues, and every string from it is escaped.
    """
    from leaderboard.markdown import render_markdown

    report = {"problem_source": "builtin", "passed": True,  # a lie: the issues below say otherwise
              "files": [{"path": "submissions/x.json", "display_name": "@everyone <img src=x> **bold**",
                         "n_kernels": 1, "n_errors": 0, "passed": True, "guard_available": True,
                         "issues": [{"severity": "error", "code": "syntax", "message": "not valid Python <script>",
                                     "key": "level_1_problem_1_sample_0"}]}]}
    (tmp_path / "validate.json").write_text(json.dumps(report))
    (tmp_path / "report.md").write_text("## ✅ FORK TEXT: all good\n")
    env = {"PATH": os.environ.get("PATH", ""), "KB_COMMENT_SINK": f"file:{tmp_path}/c.json"}
    proc = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "scripts" / "ci" / "kb_ci.py"), "post-comment",
                           "--marker", "validate", "--pr", "3", "--report-json", str(tmp_path / "validate.json")],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    (c,) = FileCommentSink(tmp_path / "c.json").list_comments(3)
    assert "FORK TEXT" not in c.body
    assert c.body.startswith("<!-- kernelbench:validate -->\n## ❌ KernelBench submission check failed with 1 error")
    assert render_markdown(report).rstrip() in c.body
    assert "<img" not in c.body and "<script>" not in c.body and "@everyone" not in c.body  # escaped

    (tmp_path / "validate.json").write_text("[1, 2")  # not a report: a clear error, nothing posted
    bad = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "scripts" / "ci" / "kb_ci.py"), "post-comment",
                          "--marker", "validate", "--pr", "4", "--report-json", str(tmp_path / "validate.json")],
                         capture_output=True, text=True, env=env, check=False)
    assert bad.returncode != 0 and "not a JSON validation report" in bad.stderr and "Traceback" not in bad.stderr
    assert FileCommentSink(tmp_path / "c.json").list_comments(4) == []


# ---------------------------------------------------------------- the official problems
def _pin(tmp_path, env_extra: dict) -> tuple[subprocess.CompletedProcess, dict]:
    """official-pin on a bare Python (-I -S): it runs before the package is installed."""
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}.txt"
    out.write_text("")
    env = {"PATH": os.environ.get("PATH", ""), "GITHUB_OUTPUT": str(out), **env_extra}
    proc = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "scripts" / "ci" / "kb_ci.py"), "official-pin"],
                          capture_output=True, text=True, env=env, check=False)
    return proc, _parse_kv_file(out)


def test_official_pin_reads_the_packages_manifest_without_the_package(tmp_path):
    from kernelbench.problems.identity import KERNELBENCH_REVISION

    proc, out = _pin(tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    assert out == {"checkout": "true", "revision": KERNELBENCH_REVISION, "path": "kernelbench-official"}
    assert f"ScalingIntelligence/KernelBench at {KERNELBENCH_REVISION}" in proc.stdout
    for env in ({"KB_SOURCE": "builtin"}, {"KB_SOURCE": "kernelbench", "KB_SOURCE_PATH": "/somewhere/KernelBench"}):
        proc, out = _pin(tmp_path, env)
        assert proc.returncode == 0 and out["checkout"] == "false", (env, proc.stderr)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "kernelbench", "revision": "main", "hashes": {}}))
    proc, out = _pin(tmp_path, {"KERNELBENCH_MANIFEST": str(bad)})
    assert proc.returncode == 2 and "'revision' must be the full 40-character commit" in proc.stderr
    assert out == {} and len(proc.stderr.strip().splitlines()) == 1


def test_problems_checks_the_checkout_against_the_manifest(tmp_path, monkeypatch, capsys):
    up = make_upstream(tmp_path)
    checkout = tmp_path / "ws" / "kernelbench-official"
    subprocess.run(["git", "clone", "--quiet", str(up.repo), str(checkout)], check=True)
    monkeypatch.setenv("KERNELBENCH_MANIFEST", str(up.manifest))
    monkeypatch.setenv("GITHUB_ENV", str(tmp_path / "env.txt"))
    monkeypatch.delenv("KB_SOURCE", raising=False)
    monkeypatch.delenv("KB_SOURCE_PATH", raising=False)
    monkeypatch.chdir(tmp_path / "ws")
    assert kb_ci.main(["problems"]) == 0
    assert f"problem set kernelbench@{up.revision}: 6 problems" in capsys.readouterr().out
    assert _parse_kv_file(tmp_path / "env.txt") == {"KB_SOURCE_PATH": str(checkout.resolve())}

    # another commit of the repository than the pinned one
    (checkout / "NOTES.md").write_text("later\n")
    git(checkout, "add", "NOTES.md")
    git(checkout, "commit", "--quiet", "-m", "a later commit")
    assert kb_ci.main(["problems"]) == 2
    assert f"but the manifest pins {up.revision[:12]}" in capsys.readouterr().err
    git(checkout, "reset", "--quiet", "--hard", up.revision)

    # a problem that differs from the pinned one: named
    relu = checkout / "KernelBench" / "level1" / "1_ReLU.py"
    relu.write_text(relu.read_text().replace("torch.relu", "torch.nn.functional.gelu"))
    assert kb_ci.main(["problems"]) == 2
    assert "does not hash the same as kernelbench@" in capsys.readouterr().err

    # no checkout at all
    assert kb_ci.main(["problems", "--checkout", str(tmp_path / "nowhere")]) == 2
    assert "the official problems were not checked out" in capsys.readouterr().err
