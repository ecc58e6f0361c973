"""The leaderboard workflows' steps, one subcommand each, so every ``run:`` line stays short.

    changed       list the submission files a pull request adds or changes (validate workflow)
    fetch         copy a pull request's submission files out of git as data (evaluate workflow)
    validate      validate those files; write the report and the comment body
    score         score new results bundles as the board would; write the comment body
    post-comment  create or update the one comment of a kind on a pull request
    official-pin  the KernelBench commit the official problems are pinned to, and whether to check it out
    problems      load the board's problem set, check it against the pinned manifest, export its path

``changed``, ``fetch``, ``post-comment`` and ``official-pin`` use only the standard library (they run
where the package is not installed); the others import the leaderboard package.
Run ``python scripts/ci/kb_ci.py <subcommand> --help`` for the options. See docs/leaderboard.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path, PurePosixPath

# This folder's ci_* modules, and the checkout's root: the repository's leaderboard/ is not part of the
# installed package, and the trusted checkout's own code is what a workflow runs.
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]

from ci_comments import RunContext, failure_comment, no_submissions_comment, validation_comment  # noqa: E402
from ci_git import changed_submissions, export_blobs, fetch_pr_head, git, write_manifest  # noqa: E402
from ci_github import CIError, api_from_env, sink_from_env, upsert_comment  # noqa: E402

#: Bodies read from an artifact are capped before parsing (the artifact may come from a hostile run).
MAX_BODY_BYTES = 1024 * 1024


def _append_to_actions_file(variable: str, what: str, name: str, value: object) -> None:
    """Append one ``name=value`` line to the file Actions names in ``variable`` (nothing outside Actions)."""
    text = str(value)
    if "\n" in text:
        raise CIError(f"{what} {name} must be one line")
    target = os.environ.get(variable)
    if target:
        with open(target, "a", encoding="utf-8") as f:
            f.write(f"{name}={text}\n")


def set_output(name: str, value: object) -> None:
    """Append ``name=value`` to $GITHUB_OUTPUT when running under Actions."""
    _append_to_actions_file("GITHUB_OUTPUT", "output", name, value)


def set_env(name: str, value: object) -> None:
    """Append ``name=value`` to $GITHUB_ENV: later steps of the job see it as an environment variable."""
    _append_to_actions_file("GITHUB_ENV", "environment variable", name, value)


def _read_lines(path: str) -> list[str]:
    return [ln for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]


def _write_lines(path: str | Path, lines: list[str]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")


def _pr_number(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not re.fullmatch(r"[1-9]\d{0,9}", str(value)):
        raise CIError(f"pull request number {value!r} is not a positive integer")
    return int(value)


# ---------------------------------------------------------------- changed
def cmd_changed(args: argparse.Namespace) -> int:
    ch = changed_submissions(args.repo, args.base, args.head)
    _write_lines(args.out, ch.changed)
    if args.deleted_out:
        _write_lines(args.deleted_out, ch.deleted)
    set_output("count", len(ch.changed))
    set_output("deleted", len(ch.deleted))
    print(f"{len(ch.changed)} submission file(s) added or changed, {len(ch.deleted)} removed "
          f"(against merge base {ch.base[:12]})")
    for p in ch.changed:
        print(f"  {p}")
    return 0


# ---------------------------------------------------------------- fetch
def cmd_fetch(args: argparse.Namespace) -> int:
    pr = _pr_number(args.pr)
    head = fetch_pr_head(args.repo, pr, expected_sha=args.expect_sha or None, token=os.environ.get("GITHUB_TOKEN"))
    ch = changed_submissions(args.repo, "HEAD", head)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise CIError(f"{out} is not empty; fetch writes into a fresh folder")
    export = export_blobs(args.repo, head, ch.changed, out)
    write_manifest(out, ch, export, pr)
    _write_lines(out / "changed.txt", ch.changed)
    set_output("head_sha", head)
    set_output("count", len(ch.changed))
    print(f"pull request #{pr} at {head[:12]}: {len(export.written)} submission file(s) copied as data to {out}, "
          f"{len(export.refused)} refused, {len(ch.deleted)} removed")
    for path, why in export.refused.items():
        print(f"  refused {path}: {why}")
    return 0


# ---------------------------------------------------------------- validate
def _location_error(rel: str, full: Path) -> str | None:
    p = PurePosixPath(rel)
    if len(p.parts) != 2 or p.parts[0] != "submissions":
        return f"{rel}: submission files go directly in submissions/, not in a sub-folder"
    if full.is_symlink():
        return f"{rel}: a symbolic link, not a file"
    return None


def cmd_validate(args: argparse.Namespace) -> int:
    from kernelbench.problems import load_board_problems, separate_board_levels
    from leaderboard.validate import FileReport, ValidationReport, load_static_guard, validate_file

    paths = _read_lines(args.files_from)
    manifest = json.loads(Path(args.manifest).read_text(encoding="utf-8")) if args.manifest else {}
    refused: dict[str, str] = manifest.get("refused", {})
    n_deleted = len(manifest.get("deleted", [])) if manifest else (
        len(_read_lines(args.deleted_from)) if args.deleted_from else 0)
    head_sha = args.head_sha or manifest.get("head_sha")
    pr = _pr_number(args.pr) if args.pr else manifest.get("pr")
    ctx = RunContext.from_env(pr=pr, head_sha=head_sha)
    out = Path(args.report_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.manifest:  # keep what was read from which commit beside the report
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if pr is not None:
        (out / "pr.json").write_text(json.dumps({"pr": pr, "head_sha": head_sha, "n_deleted": n_deleted}) + "\n",
                                     encoding="utf-8")

    if not paths:
        (out / "validate.json").write_text(ValidationReport(problem_source="-").to_json(), encoding="utf-8")
        (out / "report.md").write_text(no_submissions_comment(ctx, n_deleted), encoding="utf-8")
        print("no submission file added or changed: nothing to validate")
        return 0
    problems = load_board_problems(args.source, args.path or None)
    separate = separate_board_levels(problems)  # level 4 of the official set: its own board
    guard = None if args.no_guard else load_static_guard()
    report = ValidationReport(problem_source=problems.source, separate_levels=[str(lv) for lv in separate])
    for rel in paths:
        full = Path(args.root) / rel
        where = _location_error(rel, full)
        if rel in refused or where:
            fr = FileReport(path=rel, entry=PurePosixPath(rel).stem)
            fr.add("error", "file-refused" if rel in refused else "file-location",
                   f"{rel}: {refused[rel]}" if rel in refused else where)
        else:
            fr = validate_file(full, problems, guard=guard, use_guard=not args.no_guard, separate_levels=separate)
            fr.path = rel
        report.files.append(fr)
    (out / "validate.json").write_text(report.to_json(), encoding="utf-8")
    (out / "report.md").write_text(validation_comment(report.to_markdown(), ctx, n_deleted), encoding="utf-8")
    from tabulate import tabulate

    for f in report.files:
        for i in f.issues:
            if i.severity == "error":
                print(f"{f.path}: {i.key + ': ' if i.key else ''}{i.message} [{i.code}]")
    print(tabulate([[f.path, f.display_name or "-", f.n_kernels, f.n_errors, f.n_warnings,
                     "pass" if f.passed else "FAIL"] for f in report.files],
                   headers=["file", "display name", "kernels", "errors", "warnings", "result"]))
    print(f"\nreport written to {out}")
    return 0 if report.passed else 1


# ---------------------------------------------------------------- score
def cmd_score(args: argparse.Namespace) -> int:
    from ci_comments import evaluation_comment
    from ci_score import score_new_bundles

    from kernelbench.problems import load_board_problems

    manifest = json.loads(Path(args.manifest).read_text(encoding="utf-8")) if args.manifest else {}
    deleted = [PurePosixPath(p).stem for p in manifest.get("deleted", [])]
    problems = load_board_problems(args.source, args.path or None)
    scores = score_new_bundles(problems, args.base_root, args.submissions, args.evaluations, deleted,
                               baseline_mode=args.baseline_mode)
    ctx = RunContext.from_env(pr=manifest.get("pr"), head_sha=manifest.get("head_sha"), artifact=args.artifact)
    body = evaluation_comment(scores, ctx, problems.source)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(body, encoding="utf-8")
    from tabulate import tabulate

    print(tabulate([[s.entry, s.gpu, f"{s.overall['n_correct']}/{s.overall['n_problems']}",
                     f"{s.overall['fulldeck_geomean']:.3f}", f"#{s.rank} of {s.n_ranked}" if s.rank else "-", s.status]
                    for s in scores], headers=["entry", "gpu", "correct", "full-deck geomean", "rank", "audit"],
                   disable_numparse=True))
    print(f"\ncomment written to {args.out}")
    return 0


# ---------------------------------------------------------------- the official problems
#: The repository whose ``KernelBench/`` folder holds the official problems; the workflows check it out
#: (at the commit the package's manifest pins) into OFFICIAL_CHECKOUT inside the workspace.
OFFICIAL_REPOSITORY = "ScalingIntelligence/KernelBench"
OFFICIAL_CHECKOUT = "kernelbench-official"
#: A file of the same format pins another set instead (the package's own KERNELBENCH_MANIFEST test seam).
MANIFEST_ENV = "KERNELBENCH_MANIFEST"


def pinned_revision() -> str:
    """The commit of the official set pinned in this checkout's manifest (read as JSON: no package needed)."""
    path = Path(os.environ.get(MANIFEST_ENV) or
                Path(__file__).resolve().parents[2] / "kernelbench" / "data" / "kernelbench_manifest.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CIError(f"cannot read the pinned manifest {path}: {e}") from None
    revision = data.get("revision") if isinstance(data, dict) else None
    if not isinstance(revision, str) or not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise CIError(f"{path}: 'revision' must be the full 40-character commit of {OFFICIAL_REPOSITORY}, "
                      f"not {revision!r}")
    return revision


def cmd_official_pin(args: argparse.Namespace) -> int:
    """Say which commit to check out; only the official set with no folder of its own needs one."""
    revision = pinned_revision()
    checkout = args.source == "kernelbench" and not args.path
    set_output("checkout", "true" if checkout else "false")
    set_output("revision", revision)
    set_output("path", OFFICIAL_CHECKOUT)
    if checkout:
        print(f"problem set: the official levels 1-3 (the overall board) and level 4 (a board of its own), "
              f"{OFFICIAL_REPOSITORY} at {revision} (checked out into {OFFICIAL_CHECKOUT}/ and checked against "
              "the manifest)")
    else:
        print(f"problem set: --source {args.source}" + (f" --path {args.path}" if args.path else "")
              + " (no checkout of the official problems)")
    return 0


def cmd_problems(args: argparse.Namespace) -> int:
    """Load the board's problems exactly as the later steps will, and stop the job here if they are wrong.

    The official set is the checkout the previous step made: its commit must be the pinned one and every
    problem must hash as the manifest says (``load_board_problems`` refuses it otherwise), so a job never
    validates, evaluates or ranks against other problems under the official name.
    """
    from kernelbench.problems import load_board_problems, separate_board_levels
    from kernelbench.problems.identity import KERNELBENCH, identify

    path = args.path
    checkout = Path(args.checkout)
    if args.source == "kernelbench" and not path:
        if not checkout.is_dir():
            raise CIError(f"no {checkout}/ folder: the official problems were not checked out "
                          f"({OFFICIAL_REPOSITORY} at the pinned commit)")
        if (checkout / ".git").exists():
            head = git(checkout, "rev-parse", "HEAD").strip()
            if head != pinned_revision():
                raise CIError(f"{checkout} is {OFFICIAL_REPOSITORY} at {head[:12]}, but the manifest pins "
                              f"{pinned_revision()[:12]}")
        path = str(checkout.resolve())
    problems = load_board_problems(args.source, path)  # reads and hashes the files; runs none of them
    ident = identify(problems)
    if args.source == "kernelbench" and ident.name != KERNELBENCH:  # load_official refuses first; kept explicit
        raise CIError(f"{problems.source} is not the official set")
    if path:
        set_env("KB_SOURCE_PATH", path)
    separate = separate_board_levels(problems)
    counts = ", ".join(f"level {lv}: {n}" + (" (own board)" if lv in separate else "")
                       for lv, n in sorted(problems.count_by_level().items()))
    print(f"problem set {ident.label}: {len(problems)} problems ({counts}) from {problems.source}")
    return 0


# ---------------------------------------------------------------- post-comment
def _read_capped(path: Path) -> str:
    with open(path, "rb") as f:
        raw = f.read(MAX_BODY_BYTES + 1)
    text = raw[:MAX_BODY_BYTES].decode("utf-8", "replace")
    return text + ("\n\n… (cut)" if len(raw) > MAX_BODY_BYTES else "")


MAX_REPORT_JSON_BYTES = 20 * 1024 * 1024


def _load_report_markdown():
    """``leaderboard/markdown.py`` of this (base-branch) checkout, loaded by path: it needs only the
    standard library, so the comment job renders without installing the project."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "leaderboard" / "markdown.py"
    if not path.is_file():
        raise CIError(f"{path} is missing: run from a checkout of the repository")
    spec = importlib.util.spec_from_file_location("kb_report_markdown", path)
    if spec is None or spec.loader is None:
        raise CIError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def validation_body_from_json(report_json: Path, ctx: RunContext, n_deleted: int) -> str:
    """The validation comment rendered by this checkout's code from ``validate.json`` (untrusted data)."""
    try:
        with open(report_json, "rb") as f:
            raw = f.read(MAX_REPORT_JSON_BYTES + 1)
    except OSError as e:
        raise CIError(f"{report_json}: cannot read the validation report: {e}") from None
    if len(raw) > MAX_REPORT_JSON_BYTES:
        raise CIError(f"{report_json}: over {MAX_REPORT_JSON_BYTES} bytes; not a report this project writes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CIError(f"{report_json}: not a JSON validation report: {e}") from None
    if not isinstance(data, dict):
        raise CIError(f"{report_json}: not a JSON object")
    if not data.get("files"):
        return no_submissions_comment(ctx, n_deleted)
    return validation_comment(_load_report_markdown().render_markdown(data), ctx, n_deleted)


def cmd_post_comment(args: argparse.Namespace) -> int:
    sink = sink_from_env()
    expected = args.expect_head_sha or None
    n_deleted = 0
    if bool(args.body) == bool(args.report_json):
        raise CIError("give exactly one of --body and --report-json")
    if args.pr_file:
        try:
            meta = json.loads(_read_capped(Path(args.pr_file)))
        except (OSError, ValueError) as e:
            raise CIError(f"{args.pr_file}: cannot read the pull request number: {e}") from None
        if not isinstance(meta, dict):
            raise CIError(f"{args.pr_file}: not a JSON object")
        pr = _pr_number(meta.get("pr"))
        n = meta.get("n_deleted", 0)
        n_deleted = n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 100000 else 0
        if expected and meta.get("head_sha") != expected:
            raise CIError(f"{args.pr_file} names commit {str(meta.get('head_sha'))[:12]!r}, not the run's {expected[:12]}")
    else:
        pr = _pr_number(args.pr)
    if expected:
        if os.environ.get("KB_COMMENT_SINK", "github").startswith("file:"):
            print("note: KB_COMMENT_SINK is a file; the pull request's head is not checked against the API")
        else:
            current = api_from_env().pr_head_sha(pr)
            if current != expected:
                print(f"pull request #{pr} is now at {current[:12]}, not {expected[:12]}: this report is out of date "
                      "or names another pull request; no comment posted")
                return 0
    body_path = Path(args.body or "")
    if args.report_json:
        body = validation_body_from_json(Path(args.report_json), RunContext.from_env(pr=pr, head_sha=expected),
                                         n_deleted)
    elif body_path.is_file():
        body = _read_capped(body_path)
    elif args.failure_of:
        validation_md = None
        vdir = Path(args.validation_dir) if args.validation_dir else None
        if vdir and (vdir / "validate.json").is_file() and (vdir / "report.md").is_file():
            if not json.loads((vdir / "validate.json").read_text(encoding="utf-8")).get("passed", True):
                validation_md = _read_capped(vdir / "report.md")
        ctx = RunContext.from_env(pr=pr, head_sha=args.head_sha or expected or None)
        body = failure_comment(ctx, args.failure_of, args.job_status, validation_md)
    else:
        raise CIError(f"{body_path} does not exist and no --failure-of was given")
    result = upsert_comment(sink, pr, args.marker, body)
    print(f"{result.action} comment {result.comment_id} on pull request #{pr}")
    return 0


# ---------------------------------------------------------------- main
def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", default=os.environ.get("KB_SOURCE") or "kernelbench",
                   help="problem source: kernelbench (the official levels 1-3 and, on its own board, level 4, at the "
                        "pinned commit), builtin, "
                        "directory or huggingface (default: $KB_SOURCE or kernelbench)")
    p.add_argument("--path", default=os.environ.get("KB_SOURCE_PATH") or None,
                   help="folder or dataset for --source (default: $KB_SOURCE_PATH)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kb_ci.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")

    p = sub.add_parser("changed", help="submission files a pull request adds or changes (git diff from the merge base)")
    p.add_argument("--base", required=True, help="base commit (the pull request's base SHA)")
    p.add_argument("--head", required=True, help="head commit (the pull request's head SHA)")
    p.add_argument("--out", required=True, help="file to write the paths to, one per line")
    p.add_argument("--deleted-out", default=None, help="file to write removed submission paths to")
    p.add_argument("--repo", default=".", help="git repository (default: .)")
    p.set_defaults(func=cmd_changed)

    p = sub.add_parser("fetch", help="copy a pull request's submission files out of git without checking it out")
    p.add_argument("--pr", required=True, help="pull request number")
    p.add_argument("--expect-sha", default="", help="refuse unless the pull request's head is this commit")
    p.add_argument("--out", required=True, help="fresh folder for the files (keeps their submissions/ paths)")
    p.add_argument("--repo", default=".", help="trusted checkout whose HEAD is the base (default: .)")
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("validate", help="validate submission files; write validate.json and the comment body")
    p.add_argument("--files-from", required=True, help="file listing repo-relative paths, one per line")
    p.add_argument("--root", default=".", help="folder the paths are relative to (default: .)")
    p.add_argument("--report-dir", required=True, help="where validate.json, report.md and pr.json go")
    p.add_argument("--manifest", default=None, help="manifest.json from 'fetch' (refused and removed files, head)")
    p.add_argument("--deleted-from", default=None, help="file listing removed submission paths")
    p.add_argument("--pr", default=None, help="pull request number, recorded in pr.json")
    p.add_argument("--head-sha", default=None, help="commit the files come from, for the comment")
    p.add_argument("--no-guard", action="store_true", help="skip the static guard")
    _add_source(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("score", help="score new results bundles against the base branch's board; write the comment")
    p.add_argument("--submissions", required=True, help="folder holding the pull request's submissions/*.json")
    p.add_argument("--evaluations", required=True, help="folder holding the new results bundles")
    p.add_argument("--base-root", default=".", help="trusted checkout with submissions/, data/, baselines/ (default: .)")
    p.add_argument("--manifest", default=None, help="manifest.json from 'fetch'")
    p.add_argument("--out", required=True, help="file to write the comment body to")
    p.add_argument("--artifact", default=None, help="name of the artifact that will hold the results")
    p.add_argument("--baseline-mode", default="eager", help="baseline mode to score against (default: eager)")
    _add_source(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("post-comment", help="create or update this kind of comment on a pull request")
    p.add_argument("--marker", required=True, help="kind of comment, e.g. validate or evaluate (one per pull request)")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--pr", help="pull request number")
    who.add_argument("--pr-file", help="pr.json written by 'validate' (untrusted: checked with --expect-head-sha)")
    p.add_argument("--body", default=None, help="Markdown file to post (written by trusted code)")
    p.add_argument("--report-json", default=None,
                   help="validate.json (untrusted data): the comment is rendered from it by this checkout's code")
    p.add_argument("--expect-head-sha", default="",
                   help="post only if the pull request's head (GitHub API) is this commit")
    p.add_argument("--head-sha", default="", help="commit named in a failure comment")
    p.add_argument("--failure-of", default=None,
                   help="if --body is missing, post that this (e.g. 'evaluation') did not finish")
    p.add_argument("--job-status", default="failure", help="job status for the failure comment")
    p.add_argument("--validation-dir", default=None, help="validate's --report-dir, quoted in a failure comment")
    p.set_defaults(func=cmd_post_comment)

    p = sub.add_parser("official-pin", help="the pinned KernelBench commit, and whether this job must check it out "
                                            "(outputs checkout, revision, path)")
    _add_source(p)
    p.set_defaults(func=cmd_official_pin)

    p = sub.add_parser("problems", help="load and check the board's problem set; export KB_SOURCE_PATH for later steps")
    p.add_argument("--checkout", default=OFFICIAL_CHECKOUT,
                   help=f"where the official problems were checked out (default: {OFFICIAL_CHECKOUT})")
    _add_source(p)
    p.set_defaults(func=cmd_problems)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as e:  # one line for our own errors; a traceback for bugs
        ours = isinstance(e, CIError) or type(e).__module__.split(".")[0] in ("kernelbench", "leaderboard")
        if not ours:
            raise
        print(f"error: {e}", file=sys.stderr)
        if os.environ.get("GITHUB_ACTIONS") == "true":
            print(f"::error::{e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
