"""Run one job of a GitHub Actions workflow on this machine, step by step, as the hosted runner would.

For tests and dry runs of our own workflows: each ``run:`` step is executed with bash exactly as
written (``bash --noprofile --norc -eo pipefail``), with ``${{ }}`` expressions evaluated from a
context the caller builds (event payload, inputs, vars, secrets), the runner's environment
variables and files (``GITHUB_OUTPUT``, ``GITHUB_ENV``, ``GITHUB_STEP_SUMMARY``), ``if:``
conditions and status functions. ``uses:`` steps call local stand-ins the caller chooses: the
ones here check out from a local repository, keep artifacts in a folder, and record a Pages
deployment. It implements the subset of the workflow syntax and expression language our
workflows use and refuses the rest loudly rather than guessing.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class WorkflowError(Exception):
    """The workflow uses something this runner does not implement, or is malformed."""


# ---------------------------------------------------------------- loading
def load_workflow(path: str | Path) -> dict:
    """Parse a workflow file; YAML 1.1 reads the ``on:`` key as True, so it is renamed back."""
    import yaml  # lazy: pyyaml is a dev dependency

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise WorkflowError(f"{path}: not a workflow (top level is not a mapping)")
    if True in data:
        data["on"] = data.pop(True)
    return data


# ---------------------------------------------------------------- expressions
_TOKEN_RE = re.compile(r"""\s*(?:
    (?P<num>\d+(?:\.\d+)?) |
    (?P<str>'(?:[^']|'')*') |
    (?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\],.*]) |
    (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
)""", re.VERBOSE)
_EXPR_RE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_STATUS_FN_RE = re.compile(r"\b(success|failure|always|cancelled)\s*\(", re.IGNORECASE)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            raise WorkflowError(f"cannot parse expression {text!r} at {text[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup
        tokens.append((kind, m.group(kind)))  # type: ignore[arg-type]
    return tokens


def _num(v: Any) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip()) if v.strip() else 0.0
        except ValueError:
            return math.nan
    return math.nan


def truthy(v: Any) -> bool:
    if v is None or v is False or v == "":
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return not (v == 0 or math.isnan(v))
    return True


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if a is None and b is None:
        return True
    if type(a) is type(b) and not isinstance(a, (int, float)):
        return a is b if isinstance(a, (dict, list)) else a == b
    return _num(a) == _num(b)


def to_string(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v, indent=2)
    return str(v)


def _lookup(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        low = key.lower()
        for k, v in obj.items():
            if isinstance(k, str) and k.lower() == low:
                return v
        return None
    if isinstance(obj, list) and re.fullmatch(r"\d+", key):
        i = int(key)
        return obj[i] if i < len(obj) else None
    return None


class _Parser:
    def __init__(self, text: str, ctx: dict, status: dict):
        self.tokens = _tokenize(text)
        self.i = 0
        self.ctx = ctx
        self.status = status
        self.text = text

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise WorkflowError(f"expression {self.text!r}: expected {value or 'more'}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        v = self.or_()
        if self.peek() is not None:
            raise WorkflowError(f"expression {self.text!r}: unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return v

    def or_(self) -> Any:
        v = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            rhs = self.and_()
            v = v if truthy(v) else rhs
        return v

    def and_(self) -> Any:
        v = self.eq()
        while self.peek() == ("op", "&&"):
            self.take()
            rhs = self.eq()
            v = rhs if truthy(v) else v
        return v

    def eq(self) -> Any:
        v = self.cmp()
        while self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            rhs = self.cmp()
            v = _eq(v, rhs) if op == "==" else not _eq(v, rhs)
        return v

    def cmp(self) -> Any:
        v = self.unary()
        while self.peek() in (("op", "<"), ("op", "<="), ("op", ">"), ("op", ">=")):
            op = self.take()[1]
            a, b = _num(v), _num(self.unary())
            v = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        return v

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.postfix()

    def postfix(self) -> Any:
        v = self.primary()
        while True:
            tok = self.peek()
            if tok == ("op", "."):
                self.take()
                kind, name = self.take()
                if kind not in ("name", "num"):
                    raise WorkflowError(f"expression {self.text!r}: bad property {name!r}")
                v = _lookup(v, name)
            elif tok == ("op", "["):
                self.take()
                key = self.or_()
                self.take("]")
                v = _lookup(v, to_string(key))
            else:
                return v

    def primary(self) -> Any:
        kind, val = self.take()
        if kind == "num":
            return float(val) if "." in val else int(val)
        if kind == "str":
            return val[1:-1].replace("''", "'")
        if kind == "op" and val == "(":
            v = self.or_()
            self.take(")")
            return v
        if kind == "name":
            low = val.lower()
            if low in ("true", "false"):
                return low == "true"
            if low == "null":
                return None
            if self.peek() == ("op", "("):
                self.take()
                args = []
                if self.peek() != ("op", ")"):
                    args.append(self.or_())
                    while self.peek() == ("op", ","):
                        self.take()
                        args.append(self.or_())
                self.take(")")
                return self.call(low, args)
            return _lookup(self.ctx, val)
        raise WorkflowError(f"expression {self.text!r}: unexpected {val!r}")

    def call(self, name: str, args: list) -> Any:
        if name == "success":
            return not self.status.get("failed") and not self.status.get("cancelled")
        if name == "failure":
            return bool(self.status.get("failed"))
        if name == "always":
            return True
        if name == "cancelled":
            return bool(self.status.get("cancelled"))
        if name == "contains":
            hay, needle = args
            if isinstance(hay, list):
                return any(_eq(x, needle) for x in hay)
            return to_string(needle).lower() in to_string(hay).lower()
        if name == "startswith":
            return to_string(args[0]).lower().startswith(to_string(args[1]).lower())
        if name == "endswith":
            return to_string(args[0]).lower().endswith(to_string(args[1]).lower())
        if name == "format":
            fmt = to_string(args[0]).replace("{{", "\0").replace("}}", "\1")
            for i, a in enumerate(args[1:]):
                fmt = fmt.replace("{" + str(i) + "}", to_string(a))
            return fmt.replace("\0", "{").replace("\1", "}")
        if name == "join":
            sep = to_string(args[1]) if len(args) > 1 else ","
            return sep.join(to_string(x) for x in args[0]) if isinstance(args[0], list) else to_string(args[0])
        if name == "tojson":
            return json.dumps(args[0], indent=2)
        if name == "fromjson":
            return json.loads(to_string(args[0]))
        raise WorkflowError(f"function {name}() is not implemented by the local runner")


def evaluate(expr: str, ctx: dict, status: dict | None = None) -> Any:
    return _Parser(expr, ctx, status or {}).parse()


def interpolate(text: Any, ctx: dict, status: dict | None = None) -> Any:
    """Replace every ``${{ expr }}`` in a string; a string that is one expression keeps its type."""
    if not isinstance(text, str):
        return text
    whole = _EXPR_RE.fullmatch(text.strip())
    if whole and text.strip() == text:
        return evaluate(whole.group(1), ctx, status)
    return _EXPR_RE.sub(lambda m: to_string(evaluate(m.group(1), ctx, status)), text)


def condition(cond: Any, ctx: dict, status: dict) -> bool:
    """An ``if:``: without a status function it means ``success() && (cond)``."""
    if cond is None:
        return truthy(evaluate("success()", ctx, status))
    if isinstance(cond, bool):
        text = "true" if cond else "false"
    else:
        text = str(cond).strip()
        m = _EXPR_RE.fullmatch(text)
        if m:
            text = m.group(1).strip()
    if not _STATUS_FN_RE.search(text):
        text = f"success() && ({text})"
    return truthy(evaluate(text, ctx, status))


# ---------------------------------------------------------------- running a job
@dataclass
class StepRecord:
    name: str
    id: str | None
    outcome: str  # success, failure or skipped
    log: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class JobRun:
    job_id: str
    status: str  # success, failure or skipped
    steps: list[StepRecord] = field(default_factory=list)
    summary: str = ""
    outputs: dict[str, str] = field(default_factory=dict)

    def step(self, name: str) -> StepRecord:
        for s in self.steps:
            if s.name == name or s.id == name:
                return s
        raise KeyError(f"no step {name!r} in job {self.job_id}: {[s.name for s in self.steps]}")

    @property
    def log(self) -> str:
        return "\n".join(f"== {s.name} [{s.outcome}]\n{s.log}" for s in self.steps)


@dataclass
class StepEnv:
    """What a ``uses:`` stand-in sees: the job's folders, its github context and environment."""

    workspace: Path
    runner_temp: Path
    github: dict
    env: dict[str, str]


ActionFn = Callable[[dict[str, str], StepEnv], dict[str, str]]


@dataclass
class JobContext:
    workspace: Path
    runner_temp: Path
    #: The ``github`` context: event_name, event (payload), sha, ref, repository, run_id, ...
    github: dict
    actions: dict[str, ActionFn]
    inputs: dict = field(default_factory=dict)
    vars: dict = field(default_factory=dict)
    secrets: dict = field(default_factory=dict)
    needs: dict = field(default_factory=dict)
    #: The runner process's own environment (PATH...); GitHub's variables are added to it.
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    #: Returns a reason to skip a step (e.g. dependency installation already done), or None.
    skip_step: Callable[[dict], str | None] = lambda step: None
    step_timeout_s: float = 1800.0


def _step_name(step: dict, i: int) -> str:
    if step.get("name"):
        return str(step["name"])
    if step.get("uses"):
        return f"Run {step['uses'].split('@')[0]}"
    return f"step {i + 1}"


def _parse_kv_file(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT / GITHUB_ENV format: ``name=value`` lines and ``name<<DELIM`` blocks."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body = []
            i += 1
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        elif line.strip():
            raise WorkflowError(f"bad line in {path.name}: {line!r}")
        i += 1
    return out


def _default_env(ctx: JobContext) -> dict[str, str]:
    g = ctx.github
    event_path = ctx.runner_temp / "_github_event.json"
    event_path.write_text(json.dumps(g.get("event", {})), encoding="utf-8")
    return {
        "CI": "true", "GITHUB_ACTIONS": "true", "RUNNER_OS": "Linux", "RUNNER_TEMP": str(ctx.runner_temp),
        "GITHUB_WORKSPACE": str(ctx.workspace), "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_EVENT_NAME": str(g.get("event_name", "")), "GITHUB_SHA": str(g.get("sha", "")),
        "GITHUB_REF": str(g.get("ref", "")), "GITHUB_REPOSITORY": str(g.get("repository", "")),
        "GITHUB_RUN_ID": str(g.get("run_id", "")), "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_SERVER_URL": str(g.get("server_url", "https://github.com")),
        "GITHUB_API_URL": str(g.get("api_url", "https://api.github.com")),
        "GITHUB_ACTOR": str(g.get("actor", "")), "GITHUB_JOB": "",
    }


def run_job(workflow: dict, job_id: str, ctx: JobContext) -> JobRun:
    """Run ``jobs.<job_id>`` of ``workflow``; a failing step fails the job, later steps honour ``if:``."""
    job = (workflow.get("jobs") or {}).get(job_id)
    if not isinstance(job, dict):
        raise WorkflowError(f"workflow has no job {job_id!r}")
    for key in ("strategy", "services", "container", "uses"):
        if key in job:
            raise WorkflowError(f"job {job_id}: '{key}' is not implemented by the local runner")
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    ctx.runner_temp.mkdir(parents=True, exist_ok=True)
    github = {**ctx.github, "workspace": str(ctx.workspace), "job": job_id}
    status = {"failed": False, "cancelled": False}
    steps_ctx: dict[str, dict] = {}
    base = {"github": github, "inputs": ctx.inputs, "vars": ctx.vars, "secrets": ctx.secrets, "needs": ctx.needs,
            "runner": {"os": "Linux", "arch": "X64", "temp": str(ctx.runner_temp)}, "matrix": {}, "strategy": {}}

    env_ctx: dict[str, str] = {}
    for scope in (workflow.get("env") or {}, job.get("env") or {}):
        for k, v in scope.items():
            env_ctx[k] = to_string(interpolate(v, {**base, "env": dict(env_ctx)}, status))

    run = JobRun(job_id=job_id, status="success")
    if not condition(job.get("if"), {**base, "env": env_ctx}, status):
        run.status = "skipped"
        return run

    process_env = {**ctx.base_env, **_default_env(ctx), "GITHUB_JOB": job_id}
    extra_path: list[str] = []
    for i, step in enumerate(job.get("steps") or []):
        name = _step_name(step, i)
        sid = step.get("id")
        expr_ctx = {**base, "env": dict(env_ctx), "steps": steps_ctx, "job": {"status": "failure" if status["failed"] else "success"}}
        record = StepRecord(name=name, id=sid, outcome="skipped")
        run.steps.append(record)
        if not condition(step.get("if"), expr_ctx, status):
            record.log = "skipped: if condition is false"
            _record_step(steps_ctx, sid, "skipped", {})
            continue
        reason = ctx.skip_step(step)
        if reason:
            record.log = f"skipped by the local runner: {reason}"
            _record_step(steps_ctx, sid, "skipped", {})
            continue
        step_env = {k: to_string(interpolate(v, expr_ctx, status)) for k, v in (step.get("env") or {}).items()}
        files = {n: ctx.runner_temp / f"_{n.lower()}_{uuid.uuid4().hex[:8]}" for n in
                 ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_STEP_SUMMARY", "GITHUB_PATH")}
        for f in files.values():
            f.write_text("", encoding="utf-8")
        env = {**process_env, **env_ctx, **step_env, **{k: str(v) for k, v in files.items()}}
        if extra_path:
            env["PATH"] = os.pathsep.join([*extra_path, env.get("PATH", "")])
        ok = True
        try:
            if "run" in step:
                ok, record.log = _run_script(step, expr_ctx, status, env, ctx)
            elif "uses" in step:
                ok, record.log, outputs = _run_action(step, expr_ctx, status, env, ctx, github)
                record.outputs.update(outputs)
            else:
                raise WorkflowError(f"step {name!r} has neither run nor uses")
        except WorkflowError:
            raise
        except Exception as e:  # a stand-in failing is a failed step, as on GitHub
            ok, record.log = False, f"{type(e).__name__}: {e}"
        record.outputs.update(_parse_kv_file(files["GITHUB_OUTPUT"]))
        summary = files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8")
        if summary:
            run.summary += summary if summary.endswith("\n") else summary + "\n"
        env_ctx.update(_parse_kv_file(files["GITHUB_ENV"]))
        extra_path = [p for p in files["GITHUB_PATH"].read_text(encoding="utf-8").splitlines() if p] + extra_path
        outcome = "success" if ok else "failure"
        record.outcome = outcome
        conclusion = "success" if (ok or step.get("continue-on-error")) else "failure"
        _record_step(steps_ctx, sid, outcome, record.outputs, conclusion)
        if conclusion == "failure":
            status["failed"] = True
    run.status = "failure" if status["failed"] else "success"
    final_ctx = {**base, "env": env_ctx, "steps": steps_ctx, "job": {"status": run.status}}
    for k, v in (job.get("outputs") or {}).items():
        run.outputs[k] = to_string(interpolate(v, final_ctx, status))
    return run


def _record_step(steps_ctx: dict, sid: str | None, outcome: str, outputs: dict, conclusion: str | None = None) -> None:
    if sid:
        steps_ctx[sid] = {"outcome": outcome, "conclusion": conclusion or outcome, "outputs": dict(outputs)}


def _run_script(step: dict, expr_ctx: dict, status: dict, env: dict[str, str], ctx: JobContext) -> tuple[bool, str]:
    shell = step.get("shell", "bash")
    if shell != "bash":
        raise WorkflowError(f"shell {shell!r} is not implemented by the local runner (bash only)")
    script = to_string(interpolate(step["run"], expr_ctx, status))
    path = ctx.runner_temp / f"_step_{uuid.uuid4().hex[:8]}.sh"
    path.write_text(script, encoding="utf-8")
    cwd = ctx.workspace / step.get("working-directory", ".")
    timeout = float(step["timeout-minutes"]) * 60 if "timeout-minutes" in step else ctx.step_timeout_s
    try:
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        return False, f"timed out after {timeout:.0f} s\n{e.stdout or ''}{e.stderr or ''}"
    return proc.returncode == 0, f"{proc.stdout}{proc.stderr}" + (f"\nexit {proc.returncode}" if proc.returncode else "")


def _run_action(step: dict, expr_ctx: dict, status: dict, env: dict[str, str], ctx: JobContext,
                github: dict) -> tuple[bool, str, dict[str, str]]:
    uses = str(step["uses"])
    name = uses.split("@", 1)[0]
    fn = ctx.actions.get(name)
    if fn is None:
        raise WorkflowError(f"no local stand-in for action {name!r}")
    inputs = {k: to_string(interpolate(v, expr_ctx, status)) for k, v in (step.get("with") or {}).items()}
    outputs = fn(inputs, StepEnv(workspace=ctx.workspace, runner_temp=ctx.runner_temp, github=github, env=env))
    return True, f"{name} with {inputs}", dict(outputs or {})


# ---------------------------------------------------------------- stand-ins for the actions we use
def _git(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def checkout_from(origin: Path, repositories: dict[str, Path] | None = None) -> ActionFn:
    """actions/checkout against a local repository: ``ref`` (default github.sha), ``fetch-depth``
    (1 by default: only that commit, as on GitHub; 0: all branches and tags), ``path``,
    ``sparse-checkout`` (cone mode, as the action's default). ``repository`` other than the workflow's
    own is looked up in ``repositories`` (``owner/name`` -> a local repository); ``ref`` then defaults to
    that repository's HEAD, as the action's default branch."""

    def checkout(inputs: dict[str, str], st: StepEnv) -> dict[str, str]:
        repo = inputs.get("repository") or str(st.github.get("repository", ""))
        own = repo == str(st.github.get("repository", ""))
        source = origin if own else (repositories or {}).get(repo)
        if source is None:
            raise RuntimeError(f"no local copy of repository {repo!r} for actions/checkout")
        dest = st.workspace / inputs.get("path", ".")
        if dest.exists() and any(dest.iterdir()):
            raise RuntimeError(f"checkout target {dest} is not empty")
        dest.mkdir(parents=True, exist_ok=True)
        ref = inputs.get("ref") or (st.github.get("sha") if own else None) or "HEAD"
        depth = int(inputs.get("fetch-depth") or 1)
        _git("init", "--quiet", str(dest))
        _git("remote", "add", "origin", f"file://{source}", cwd=dest)
        if depth == 0:
            _git("fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*",
                 cwd=dest)
            _git("fetch", "--quiet", "origin", ref, cwd=dest)
        else:
            _git("fetch", "--quiet", f"--depth={depth}", "origin", ref, cwd=dest)
        sparse = [ln.strip() for ln in inputs.get("sparse-checkout", "").splitlines() if ln.strip()]
        if sparse:
            _git("sparse-checkout", "set", "--cone", *sparse, cwd=dest)
        _git("checkout", "--quiet", "--detach", "FETCH_HEAD", cwd=dest)
        return {"commit": _git("rev-parse", "HEAD", cwd=dest).strip(), "ref": ref}

    return checkout


def setup_python(inputs: dict[str, str], st: StepEnv) -> dict[str, str]:
    """The runner's Python is the one on PATH already."""
    return {"python-version": inputs.get("python-version", "")}


def _files_under(paths: list[Path]) -> tuple[Path, list[Path]]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.is_file())
        elif p.is_file():
            files.append(p)
    if not paths:
        return Path("/"), files
    roots = [p if p.is_dir() else p.parent for p in paths if p.exists()]
    root = Path(os.path.commonpath([str(r) for r in roots])) if roots else Path("/")
    return root, files


def upload_artifact_to(store: Path) -> ActionFn:
    """actions/upload-artifact into ``store/<name>/``: files keep their paths below the paths' common folder."""

    def upload(inputs: dict[str, str], st: StepEnv) -> dict[str, str]:
        name = inputs.get("name") or "artifact"
        dest = store / name
        if dest.exists():
            raise RuntimeError(f"an artifact named {name!r} already exists")
        paths = [(st.workspace / p.strip()) for p in inputs.get("path", "").splitlines() if p.strip()]
        root, files = _files_under(paths)
        if not files:
            if inputs.get("if-no-files-found", "warn") == "error":
                raise RuntimeError(f"no files found for artifact {name!r}")
            return {}
        for f in files:
            target = dest / f.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
        return {"artifact-id": name}

    return upload


def download_artifact_from(store: Path) -> ActionFn:
    """actions/download-artifact of one named artifact (any ``run-id``: the store is shared)."""

    def download(inputs: dict[str, str], st: StepEnv) -> dict[str, str]:
        name = inputs.get("name")
        if not name:
            raise RuntimeError("download-artifact without a name is not implemented")
        src = store / name
        if not src.is_dir():
            raise RuntimeError(f"artifact {name!r} not found")
        dest = st.workspace / inputs.get("path", ".")
        shutil.copytree(src, dest, dirs_exist_ok=True)
        return {"download-path": str(dest)}

    return download


def configure_pages(inputs: dict[str, str], st: StepEnv) -> dict[str, str]:
    owner, _, repo = str(st.github.get("repository", "o/r")).partition("/")
    return {"base_url": f"https://{owner}.github.io/{repo}", "origin": f"https://{owner}.github.io",
            "host": f"{owner}.github.io", "base_path": f"/{repo}"}


def upload_pages_artifact_to(store: Path) -> ActionFn:
    def upload(inputs: dict[str, str], st: StepEnv) -> dict[str, str]:
        src = st.workspace / inputs.get("path", "_site/")
        if not src.is_dir():
            raise RuntimeError(f"pages artifact path {src} is not a folder")
        for f in src.rglob("*"):
            if f.is_symlink():
                raise RuntimeError(f"pages artifact contains a symbolic link: {f}")
        dest = store / (inputs.get("name") or "github-pages")
        if dest.exists():
            raise RuntimeError(f"an artifact named {dest.name!r} already exists")
        shutil.copytree(src, dest)
        return {"artifact_id": dest.name}

    return upload


def deploy_pages_from(store: Path, deployments: list[dict]) -> ActionFn:
    def deploy(inputs: dict[str, str], st: StepEnv) -> dict[str, str]:
        name = inputs.get("artifact_name") or "github-pages"
        if not (store / name).is_dir():
            raise RuntimeError(f"no pages artifact {name!r} to deploy")
        owner, _, repo = str(st.github.get("repository", "o/r")).partition("/")
        url = f"https://{owner}.github.io/{repo}/"
        deployments.append({"artifact": str(store / name), "page_url": url})
        return {"page_url": url}

    return deploy


def standard_actions(origin: Path, store: Path, deployments: list[dict],
                     repositories: dict[str, Path] | None = None) -> dict[str, ActionFn]:
    """Stand-ins for every action our workflows use, keyed as in ``uses:``; ``repositories`` are the local
    copies of other repositories a workflow checks out."""
    return {
        "actions/checkout": checkout_from(origin, repositories),
        "actions/setup-python": setup_python,
        "actions/upload-artifact": upload_artifact_to(store),
        "actions/download-artifact": download_artifact_from(store),
        "actions/configure-pages": configure_pages,
        "actions/upload-pages-artifact": upload_pages_artifact_to(store),
        "actions/deploy-pages": deploy_pages_from(store, deployments),
    }
