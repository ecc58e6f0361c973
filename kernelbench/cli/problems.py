"""``kernelbench problems list|show``: browse a problem source."""

from __future__ import annotations

import argparse
import json

from kernelbench.cli.common import add_json_arg, add_source_args, json_to_stdout, level_type, write_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("problems", help="list or show problems from a source",
                       description="List or show problems from the built-in suite, a KernelBench folder or the dataset.")
    psub = p.add_subparsers(dest="problems_command", metavar="ACTION", required=True)

    ls = psub.add_parser("list", help="list problems", description="List problems, one per line.")
    add_source_args(ls)
    ls.add_argument("--level", type=level_type, nargs="*", default=None, help="only these levels")
    add_json_arg(ls, "the list")
    ls.set_defaults(func=_list)

    sh = psub.add_parser("show", help="print one problem's source", description="Print one problem's source code.")
    add_source_args(sh)
    sh.add_argument("--level", type=level_type, required=True)
    sh.add_argument("--problem-id", type=int, required=True)
    add_json_arg(sh, "the problem (with its code)")
    sh.set_defaults(func=_show)


def _problem_dict(p, with_code: bool = False) -> dict:
    from kernelbench.problems.identity import kernelbench_code_hash

    # hash is KernelBench's get_code_hash of the code less a CPU_SIZE declaration (the problem's identity);
    # kernelbench_hash is get_code_hash of the file as written. They differ only where CPU_SIZE is declared.
    d = {"level": p.level, "problem_id": p.problem_id, "name": p.name, "source": p.source, "hash": p.hash,
         "kernelbench_hash": kernelbench_code_hash(p.code), "requirements": list(p.requirements), "key": p.key}
    if with_code:
        d["code"] = p.code
    return d


def _missing_requirements(p) -> list[str]:
    import importlib.util

    return [r for r in p.requirements if importlib.util.find_spec(r) is None]


def _list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from kernelbench.problems import load_problems

    ps = load_problems(args.source, args.path, levels=args.level)
    if args.level:
        ps = ps.select(levels=args.level)
    if args.json:
        write_json(args, json.dumps([_problem_dict(p) for p in ps], indent=2))
    if json_to_stdout(args):
        return 0
    rows = []
    for p in ps:
        missing = _missing_requirements(p)
        note = f"needs {', '.join(missing)} (not installed)" if missing else ", ".join(p.requirements)
        rows.append([p.level, p.problem_id, p.name, note])
    print(tabulate(rows, headers=["level", "id", "name", "requires"]))
    counts = ", ".join(f"level {lv}: {n}" for lv, n in sorted(ps.count_by_level().items()))
    print(f"\n{len(ps)} problems from {ps.source} ({counts}); problem set {_set_label(ps)}")
    return 0


def _set_label(ps) -> str:
    from kernelbench.problems.identity import ProblemSetMismatchError, identify

    try:
        return identify(ps).label
    except ProblemSetMismatchError as e:  # listing a changed checkout still works; say what it is not
        return f"none pinned ({e})"


def _show(args: argparse.Namespace) -> int:
    from kernelbench.problems import load_problems

    ps = load_problems(args.source, args.path, levels=[args.level])
    p = ps.get(args.level, args.problem_id)
    if args.json:
        write_json(args, json.dumps(_problem_dict(p, with_code=True), indent=2))
    if not json_to_stdout(args):
        print(f"# level {p.level} problem {p.problem_id}: {p.name} ({p.source}, hash {p.hash[:12]})")
        missing = _missing_requirements(p)
        if missing:
            print(f"# needs {', '.join(missing)}, which is not installed: pip install 'kernelbench[transformers]'")
        print(p.code)
    return 0
