"""The workflows' security properties, read from the files: triggers, permissions, secrets, pins.

The rules: untrusted code (a pull request's) never runs in a job that holds secrets or a write
token; every job states its permissions; secrets reach one step only; expressions are never
pasted into scripts; third-party actions are pinned to the SHAs listed in .github/actions-pins.yml.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
PINS = ROOT / ".github" / "actions-pins.yml"
sys.path.insert(0, str(ROOT / "scripts" / "ci"))

from local_runner import load_workflow  # noqa: E402

NAMES = ["ci", "validate", "comment", "evaluate", "publish"]
#: The permissions each job is allowed, exactly.
JOB_PERMISSIONS = {
    ("ci", "test"): {"contents": "read"},
    ("validate", "validate"): {"contents": "read"},
    ("comment", "comment"): {"actions": "read", "pull-requests": "write"},
    ("evaluate", "evaluate"): {"contents": "read", "pull-requests": "write"},
    ("publish", "build"): {"contents": "read"},
    ("publish", "deploy"): {"pages": "write", "id-token": "write"},
}
#: Triggers that run with the base repository's secrets and a token that can write.
PRIVILEGED_TRIGGERS = {"pull_request_target", "workflow_run"}
SHA_RE = re.compile(r"^[0-9a-f]{40}$")


@pytest.fixture(scope="module")
def wf() -> dict[str, dict]:
    files = sorted(p.stem for p in WORKFLOWS.glob("*.y*ml"))
    assert files == sorted(NAMES), f"unexpected workflow files: {files}"
    return {n: load_workflow(WORKFLOWS / f"{n}.yml") for n in NAMES}


def triggers(w: dict) -> dict:
    on = w["on"]
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return on


def steps(job: dict) -> list[dict]:
    return job.get("steps") or []


def text(obj) -> str:
    return json.dumps(obj)


def secret_refs(obj) -> list[str]:
    return re.findall(r"secrets\.([A-Za-z_][A-Za-z0-9_]*)", text(obj))


def jobs(wf: dict[str, dict]):
    for name, w in wf.items():
        for job_id, job in w["jobs"].items():
            yield name, job_id, job


# ---------------------------------------------------------------- permissions and timeouts
def test_permissions_are_deny_by_default_and_exact_per_job(wf):
    for name, w in wf.items():
        top = w.get("permissions")
        assert top is not None, f"{name}: no top-level permissions (the default token can write)"
        assert isinstance(top, dict) and all(v in ("read", "none") for v in top.values()), f"{name}: {top}"
    seen = set()
    for name, job_id, job in jobs(wf):
        assert job.get("permissions") == JOB_PERMISSIONS[(name, job_id)], f"{name}.{job_id}: {job.get('permissions')}"
        seen.add((name, job_id))
    assert seen == set(JOB_PERMISSIONS)


def test_every_job_has_a_timeout(wf):
    for name, job_id, job in jobs(wf):
        t = job.get("timeout-minutes")
        assert isinstance(t, int) and 0 < t <= 360, f"{name}.{job_id}: timeout-minutes {t!r}"


# ---------------------------------------------------------------- secrets and untrusted code
def test_secrets_reach_only_the_modal_step(wf):
    holders = []
    for name, w in wf.items():
        assert not secret_refs(w.get("env")), f"{name}: secrets in workflow-level env"
        for job_id, job in w["jobs"].items():
            assert not secret_refs({k: v for k, v in job.items() if k != "steps"}), f"{name}.{job_id}: secrets outside steps"
            for st in steps(job):
                refs = secret_refs(st)
                if refs:
                    assert not secret_refs({k: v for k, v in st.items() if k != "env"}), \
                        f"{name}.{job_id}: secrets outside a step's env"
                    holders.append((name, job_id, st.get("name"), sorted(st["env"]), sorted(refs)))
    assert holders == [("evaluate", "evaluate", "Evaluate on Modal", ["MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"],
                        ["MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"])]
    (modal_step,) = [s for s in steps(wf["evaluate"]["jobs"]["evaluate"]) if s.get("name") == "Evaluate on Modal"]
    assert modal_step["env"] == {"MODAL_TOKEN_ID": "${{ secrets.MODAL_TOKEN_ID }}",
                                 "MODAL_TOKEN_SECRET": "${{ secrets.MODAL_TOKEN_SECRET }}"}
    # the runner is Modal unless the environment says otherwise; no workflow says otherwise
    assert '--runner "${KB_RUNNER:-modal}"' in modal_step["run"]


def test_test_seams_are_never_set_by_a_workflow(wf):
    for name, w in wf.items():
        for seam in ("KB_RUNNER", "KB_COMMENT_SINK", "KERNELBENCH_MANIFEST"):
            assert not re.search(rf'"{seam}"\s*:', text(w)), f"{name} sets {seam}"


def test_github_token_is_passed_only_where_it_is_used(wf):
    for name, job_id, job in jobs(wf):
        for st in steps(job):
            for key, value in {**(st.get("env") or {}), **(st.get("with") or {})}.items():
                if "github.token" in str(value) or "secrets.GITHUB_TOKEN" in str(value):
                    assert key in ("GITHUB_TOKEN", "github-token"), f"{name}.{job_id}: token as {key}"
            if "github.token" in text(st.get("env")):
                assert "post-comment" in st.get("run", "") or "kb_ci.py fetch" in st.get("run", ""), \
                    f"{name}.{job_id}: step {st.get('name')} gets the token but does not need it"


def test_no_expression_is_pasted_into_a_script(wf):
    """``${{ }}`` in ``run:`` is expanded before the shell sees it: a crafted title or branch name
    would become code. Everything reaches scripts through env."""
    for name, job_id, job in jobs(wf):
        for st in steps(job):
            assert "${{" not in st.get("run", ""), f"{name}.{job_id}: expression in the script of {st.get('name')}"


#: The one checkout of another repository a job may make: KernelBench's problems, at the commit the
#: checkout's own manifest pins (``kb_ci.py official-pin``), without keeping the token.
OFFICIAL_CHECKOUT = {"repository": "ScalingIntelligence/KernelBench", "ref": "${{ steps.pin.outputs.revision }}",
                     "path": "${{ steps.pin.outputs.path }}", "sparse-checkout": "KernelBench",
                     "persist-credentials": False}


def test_the_leaderboard_workflows_rank_the_official_problems_checked_against_the_manifest(wf):
    """validate, evaluate and publish default to the official set, check it out at the pinned commit and
    check it against the manifest before any step that reads it."""
    for name, job_id in (("validate", "validate"), ("evaluate", "evaluate"), ("publish", "build")):
        job = wf[name]["jobs"][job_id]
        assert job["env"]["KB_SOURCE"] == "${{ vars.KB_SOURCE || 'kernelbench' }}", name
        names = [s.get("name") or s.get("uses", "").split("@")[0] for s in steps(job)]
        pin = names.index("Pin the problem set")
        co = names.index("Check out the official problems")
        check = names.index("Check the problem set")
        assert str(steps(job)[0].get("uses", "")).startswith("actions/checkout@") and pin < co < check, names
        assert steps(job)[pin] == {"name": "Pin the problem set", "id": "pin",
                                   "run": "python scripts/ci/kb_ci.py official-pin"}
        assert steps(job)[co]["if"] == "steps.pin.outputs.checkout == 'true'"
        assert steps(job)[co]["with"] == OFFICIAL_CHECKOUT
        assert steps(job)[check]["run"].strip() == "python scripts/ci/kb_ci.py problems"
        for i, st in enumerate(steps(job)):
            if "KB_SOURCE" in st.get("run", "") or "kb_ci.py validate" in st.get("run", "") \
                    or "kb_ci.py score" in st.get("run", ""):
                assert i > check, f"{name}: {st.get('name')} reads the problems before they are checked"


PR_CODE_PATTERNS = [
    r"\bgit\s+(checkout|switch|merge|pull|worktree|reset|apply|am|cherry-pick|rebase|restore)\b",
    r"refs/pull", r"head_ref", r"\bpip\s+install\b",
    # running something from the folder the submission files are copied to
    r"(^\s*|[;&|]\s*|\$\(\s*|\b(bash|sh|python3?|source|exec|\.)\s+)\"?\$\{?RUNNER_TEMP\}?\"?/untrusted",
]


def privileged_jobs(wf):
    for name, job_id, job in jobs(wf):
        w = wf[name]
        perms = job.get("permissions") or {}
        if (set(triggers(w)) & PRIVILEGED_TRIGGERS or secret_refs(job)
                or any(v == "write" for k, v in perms.items() if k not in ("pages", "id-token"))):
            yield name, job_id, job


def test_privileged_jobs_never_check_out_or_run_pull_request_code(wf):
    found = {(n, j) for n, j, _ in privileged_jobs(wf)}
    assert found == {("comment", "comment"), ("evaluate", "evaluate")}
    for name, job_id, job in privileged_jobs(wf):
        for st in steps(job):
            where = f"{name}.{job_id}: {st.get('name') or st.get('uses')}"
            if str(st.get("uses", "")).startswith("actions/checkout@"):
                w = st.get("with") or {}
                assert w.get("persist-credentials") is False, f"{where}: leaves the token in .git/config"
                if "repository" in w:  # only the official problems, at the commit the base branch pins
                    assert w == OFFICIAL_CHECKOUT, f"{where}: checks out {w}"
                else:
                    assert w.get("ref") == "${{ github.sha }}", f"{where}: checks out {w.get('ref')!r}"
            assert "pull_request.head" not in text({k: v for k, v in st.items() if k != "env"}), where
            for pattern in PR_CODE_PATTERNS:
                assert not re.search(pattern, st.get("run", ""), re.MULTILINE), f"{where}: matches {pattern}"
            if "run" in st:
                for line in [ln.strip() for ln in st["run"].splitlines() if ln.strip()]:
                    if line.startswith(("python", "bash ")):
                        assert line.startswith(("python scripts/ci/kb_ci.py", "bash scripts/ci/install.sh")), \
                            f"{where}: runs {line!r}"
        # the head SHA of the labelled pull request is only ever passed as data (to compare)
        uses_head = [k for k, v in (job.get("env") or {}).items() if "pull_request.head" in str(v)]
        assert uses_head in ([], ["LABELLED_SHA"]), f"{name}.{job_id}: {uses_head}"


def test_no_caches_that_a_pull_request_could_poison(wf):
    """A cache written by the pull request's own validate run and restored in a privileged job
    would be code from the pull request; so no job uses one."""
    for name, job_id, job in jobs(wf):
        for st in steps(job):
            assert not str(st.get("uses", "")).startswith("actions/cache"), f"{name}.{job_id}"
            assert not (st.get("with") or {}).get("cache"), f"{name}.{job_id}: {st.get('uses')} with a cache"


def test_only_trusted_entry_points_run_with_the_modal_token(wf):
    job = wf["evaluate"]["jobs"]["evaluate"]
    names = [s.get("name") or s.get("uses", "").split("@")[0] for s in steps(job)]
    i = names.index("Evaluate on Modal")
    assert names.index("Read the submission files as data") < names.index("Validate") < i < names.index("Score")
    run = steps(job)[i]["run"]
    commands = {m.group(1) for m in re.finditer(r"^\s*(?:if\s+)?([a-z][\w-]*)\b", run, re.MULTILINE)}
    assert commands <= {"shopt", "files", "if", "echo", "exit", "source_args", "for", "kernelbench", "break",
                        "fi", "done"}, commands
    assert "kernelbench leaderboard evaluate" in run


# ---------------------------------------------------------------- triggers
def test_privileged_triggers_live_only_where_they_are_safe(wf):
    where = {t: sorted(n for n, w in wf.items() if t in triggers(w)) for t in PRIVILEGED_TRIGGERS | {"pull_request"}}
    assert where["pull_request_target"] == ["evaluate"]
    assert where["workflow_run"] == ["comment"]
    assert where["pull_request"] == ["ci", "validate"]


def test_evaluate_runs_on_the_evaluate_label_or_by_hand(wf):
    w = wf["evaluate"]
    on = triggers(w)
    assert on["pull_request_target"] == {"types": ["labeled"]}
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["pr_number"]["required"] is True
    from kernelbench.hardware import MODAL_GPUS

    assert inputs["gpu"]["type"] == "choice" and tuple(inputs["gpu"]["options"]) == MODAL_GPUS
    assert inputs["gpu"]["default"] == "H100"
    job = w["jobs"]["evaluate"]
    assert job["if"] == "github.event_name == 'workflow_dispatch' || github.event.label.name == 'evaluate'"
    assert job["concurrency"] == {"group": "evaluate-pr-${{ github.event.pull_request.number || inputs.pr_number }}",
                                  "cancel-in-progress": False}
    assert job["env"]["GPU"] == "${{ inputs.gpu || vars.KB_EVAL_GPU || 'H100' }}"
    assert job["env"]["LABELLED_SHA"] == "${{ github.event.pull_request.head.sha }}"
    fetch = next(s for s in steps(job) if s.get("id") == "fetch")
    assert '--expect-sha "$LABELLED_SHA"' in fetch["run"]
    upload = next(s for s in steps(job) if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["name"] == "evaluation-pr-${{ env.PR_NUMBER }}"


def test_validate_is_unprivileged_and_comment_posts_its_report(wf):
    v, c = wf["validate"], wf["comment"]
    assert triggers(v) == {"pull_request": {"paths": ["submissions/**"]}}
    assert not secret_refs(v)
    vjob = v["jobs"]["validate"]
    upload = next(s for s in steps(vjob) if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    assert any(s.get("if") == "always()" and "GITHUB_STEP_SUMMARY" in s.get("run", "") for s in steps(vjob))

    assert triggers(c) == {"workflow_run": {"workflows": [v["name"]], "types": ["completed"]}}
    cjob = c["jobs"]["comment"]
    assert "github.event.workflow_run.event == 'pull_request'" in cjob["if"]
    download = next(s for s in steps(cjob) if str(s.get("uses", "")).startswith("actions/download-artifact@"))
    assert download["with"]["name"] == upload["with"]["name"]
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    post = next(s for s in steps(cjob) if "post-comment" in s.get("run", ""))
    assert '--expect-head-sha "$HEAD_SHA"' in post["run"] and "--pr-file" in post["run"]
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"


def test_publish_deploys_main_to_pages(wf):
    w = wf["publish"]
    on = triggers(w)
    assert on["push"]["branches"] == ["main"]
    assert {"submissions/**", "data/**", "baselines/**", "leaderboard/**"} <= set(on["push"]["paths"])
    assert "workflow_dispatch" in on
    assert w["concurrency"] == {"group": "pages", "cancel-in-progress": False}
    deploy = w["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in steps(deploy)] == ["actions/deploy-pages"]


def test_ci_runs_the_project_test_command(wf):
    w = wf["ci"]
    assert set(triggers(w)) == {"push", "pull_request"}
    assert any(s.get("run") == "bash .ci/run" for s in steps(w["jobs"]["test"]))


# ---------------------------------------------------------------- pinned actions
def test_actions_are_pinned_to_the_shas_listed_in_one_place():
    pins = yaml.safe_load(PINS.read_text(encoding="utf-8"))
    for action, pin in pins.items():
        assert SHA_RE.match(pin["sha"]), action
        assert re.fullmatch(r"v\d+", pin["major"]) and pin["release"].startswith(pin["major"] + "."), action
    used = set()
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", line)
            if not m:
                continue
            ref, rest = m.group(1), m.group(2)
            where = f"{path.name}:{n}"
            assert not ref.startswith(("./", "docker://")), f"{where}: {ref}"
            action, _, sha = ref.partition("@")
            assert action in pins, f"{where}: {action} is not in {PINS.name}"
            assert sha == pins[action]["sha"], f"{where}: {action}@{sha} is not the pinned {pins[action]['sha']}"
            assert rest.strip() == f"# {pins[action]['major']}", f"{where}: version comment {rest.strip()!r}"
            used.add(action)
    assert used == set(pins), f"pinned but unused: {set(pins) - used}"


def test_modal_dispatch_in_ci_confirms_the_cost_explicitly(wf):
    """Without a terminal the CLI dispatches to Modal only with --yes; CI says it, so the estimate is logged."""
    found = 0
    for _name, _job_id, job in jobs(wf):
        for step in steps(job):
            for line in re.findall(r"kernelbench leaderboard evaluate[^\n]*", step.get("run", "")):
                found += 1
                assert "--yes" in line, line
    assert found, "no workflow evaluates on Modal"


def test_the_modal_token_lives_in_a_reviewed_environment(wf):
    """Only a job bound to the GitHub Environment (whose required reviewers approve each run) names the token."""
    holders = [(name, job_id, job) for name, job_id, job in jobs(wf)
               if any(s.startswith("MODAL_") for s in secret_refs(job))]
    assert holders, "no job uses the Modal token"
    for name, job_id, job in holders:
        env = job.get("environment")
        env_name = env.get("name") if isinstance(env, dict) else env
        assert env_name == "modal-evaluation", f"{name}.{job_id} holds the Modal token outside the environment"


def test_the_pull_request_comment_is_never_markdown_the_validate_run_wrote(wf):
    """comment.yml renders from validate.json with the base branch's code; it never posts report.md."""
    run = " ".join(s.get("run", "") for s in steps(wf["comment"]["jobs"]["comment"]))
    assert "--report-json" in run and "validate.json" in run
    assert "report.md" not in run and "--body" not in run
