"""Options shared by several verbs, so they are spelled the same everywhere."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from kernelbench.problems import LEVELS, source_names


def add_source_args(p: argparse.ArgumentParser, default: str = "builtin",
                    default_help: str = "builtin, the suite shipped with the package") -> None:
    g = p.add_argument_group("problem source")
    g.add_argument("--source", choices=source_names(), default=default,
                   help=f"where problems come from: kernelbench is the official set at the pinned revision (from "
                        f"--path, ./KernelBench/ or the hub, checked by hash) (default: {default_help})")
    g.add_argument("--path", default=None,
                   help="folder for --source directory (with level1/, level2/...) or a local dataset for "
                        "--source huggingface (default: the hub dataset ScalingIntelligence/KernelBench)")


def read_kernel_file(name: str) -> str:
    """The text of a candidate's file named on the command line, or a one-line error saying why not."""
    from pathlib import Path

    from kernelbench.errors import KernelBenchError

    path = Path(name)
    if not path.is_file():
        raise KernelBenchError(f"kernel file {path} does not exist")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KernelBenchError(f"kernel file {path} is not UTF-8 text") from None


def level_type(value: str) -> int:
    try:
        lv = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"level must be a number, got {value!r}") from None
    if lv not in LEVELS:
        raise argparse.ArgumentTypeError(f"unknown level {lv} (levels are {', '.join(map(str, LEVELS))})")
    return lv


def _number(value: str, cast: Callable[[str], float], noun: str, bound: str, ok: Callable[[float], bool]):
    """Parse ``value`` with ``cast``; argparse reports ``expected <noun>[<bound>], got ...`` otherwise."""
    try:
        v = cast(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {value!r}") from None
    if not ok(v):
        raise argparse.ArgumentTypeError(f"expected {noun}{bound}, got {v:g}")
    return v


def problem_ids(spec: str | None, flag: str) -> list[int] | None:
    """The ids of ``--problem-id 1,3,5-8`` (None when not given); a bad spec is a one-line error naming ``flag``."""
    from kernelbench.errors import KernelBenchError
    from kernelbench.problems import parse_id_spec

    if not spec:
        return None
    try:
        return parse_id_spec(spec)
    except ValueError as e:
        raise KernelBenchError(f"{flag}: {e}") from None


def positive_int(value: str) -> int:
    return _number(value, int, "a positive integer", "", lambda v: v > 0)


def non_negative_int(value: str) -> int:
    return _number(value, int, "an integer", ", 0 or more", lambda v: v >= 0)


def positive_float(value: str) -> float:
    return _number(value, float, "a number", " > 0", lambda v: v > 0)


def non_negative_float(value: str) -> float:
    return _number(value, float, "a number", " >= 0", lambda v: v >= 0)


# ---------------------------------------------------------------------------------------------
# One --json convention for every command and script: ``--json PATH`` writes the machine-readable
# result to PATH (the usual text still goes to stdout); ``--json -`` or a bare ``--json`` writes it to
# stdout, and then stdout carries nothing else (the text, if any, goes to stderr). Older spellings
# (``--json-out``, ``--report-json``, ``--output``) still work, with a one-line deprecation warning.

#: The value of a bare ``--json``: stdout.
JSON_STDOUT = "-"


class _DeprecatedJsonSpelling(argparse.Action):
    """An old spelling of ``--json PATH``: does the same, says once on stderr what to write instead."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated; use --json {values}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_json_arg(p: argparse.ArgumentParser, what: str, deprecated: tuple[str, ...] = (),
                 default: str | None = None) -> None:
    """Add ``--json [PATH]`` (``dest="json"``) and the command's old spellings as hidden aliases."""
    p.add_argument("--json", nargs="?", const=JSON_STDOUT, default=default, metavar="PATH",
                   help=f"write {what} as JSON to PATH; '-' or no PATH: to stdout, which then carries only the "
                        "JSON" + (" (default %(default)s)" if default else ""))
    for spelling in deprecated:
        p.add_argument(spelling, dest="json", action=_DeprecatedJsonSpelling, metavar="PATH", help=argparse.SUPPRESS)


def json_to_stdout(args: argparse.Namespace) -> bool:
    """Whether the command's stdout is for the JSON only (``--json -``): its text then goes elsewhere."""
    return getattr(args, "json", None) == JSON_STDOUT


@contextlib.contextmanager
def stdout_for_json(args: argparse.Namespace) -> Iterator[None]:
    """Around a command: with ``--json -``, whatever it prints goes to stderr, so that stdout holds only
    the JSON that :func:`write_json` writes (to the stdout saved here)."""
    if not json_to_stdout(args):
        yield
        return
    args.json_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        yield


def write_json(args: argparse.Namespace, text: str) -> None:
    """Write the command's JSON ``text`` where ``--json`` says: nowhere, a file (atomically), or stdout."""
    from kernelbench.io_utils import atomic_write_text

    target = getattr(args, "json", None)
    text = text if text.endswith("\n") else text + "\n"
    if target is None:
        return
    if target == JSON_STDOUT:
        out = getattr(args, "json_stdout", sys.stdout)
        out.write(text)
        out.flush()
        return
    atomic_write_text(target, text)
    print(f"wrote {target}")


def add_runner_args(p: argparse.ArgumentParser) -> None:
    from kernelbench.runners import runner_names

    g = p.add_argument_group("where to run")
    g.add_argument("--runner", choices=runner_names(), default="local",
                   help="local: this machine's GPUs (or CPU); modal: Modal cloud GPUs (needs a Modal token)")
    g.add_argument("--gpu", default="H100", help="GPU type for --runner modal: H100, A100-80GB, L40S, B200")
    c = p.add_argument_group("cost control (--runner modal; the estimate is printed before anything is sent)")
    c.add_argument("--max-containers", type=positive_int, default=None,
                   help="at most this many Modal containers (GPUs) at once")
    # Commands that also call an LLM already have --max-cost (the LLM's spend); there the GPU cap is
    # --max-gpu-cost, so neither can be mistaken for the other.
    cost_flag = "--max-gpu-cost" if "--max-cost" in p._option_string_actions else "--max-cost"
    c.add_argument(cost_flag, dest="max_gpu_cost", type=float, default=None, metavar="USD",
                   help="Modal: stop dispatching before the estimated GPU spend passes this many dollars")
    c.add_argument("--dry-run", action="store_true", help="print the kernel count, GPU and cost estimate; send nothing")
    c.add_argument("--yes", action="store_true",
                   help="dispatch without asking (required when stdin is not a terminal, e.g. in CI)")


def confirm_estimate(assume_yes: bool, dry_run: bool = False):
    """The confirmation a CLI gives the Modal runner: print the estimate, then ask on a terminal.

    Without a terminal to ask on, only ``--yes`` dispatches: a script or CI job never spends money
    it was not told to spend.
    """
    from kernelbench.errors import KernelBenchError

    def confirm(estimate) -> bool:
        print(f"Modal: {estimate.describe()}", file=sys.stderr, flush=True)
        if assume_yes or dry_run:
            return True
        if not sys.stdin.isatty():
            raise KernelBenchError("not dispatched: stdin is not a terminal, so nobody can confirm the cost "
                                   "above; pass --yes to dispatch (or --dry-run to see the estimate only)")
        answer = input("dispatch? [y/N] ").strip().lower()
        return answer in ("y", "yes")

    return confirm


def load_modal_app():
    """The Modal app's module, for the Modal runner to run ephemerally when the app is not deployed.

    The command imports it (a shell may); the library's runner only calls this. ``modal_app/`` comes
    from a checkout of the repository (``kernelbench.cli.checkout``); without one, a one-line error
    (``CheckoutRequired``) says what to do. An ImportError inside the app (no ``modal``) still reaches
    the runner, which turns it into a one-line error of its own.
    """
    from kernelbench.cli.checkout import import_from_checkout

    return import_from_checkout("modal_app.app", "a Modal app that is not deployed (`modal deploy modal_app/app.py`)")


def runner_options(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for ``get_runner`` from the cost-control flags (none for the local runner)."""
    if getattr(args, "runner", "local") != "modal":
        return {}
    return {"max_containers": args.max_containers, "max_cost_usd": args.max_gpu_cost, "dry_run": args.dry_run,
            "confirm": confirm_estimate(args.yes, args.dry_run), "app_loader": load_modal_app}


def add_eval_args(p: argparse.ArgumentParser, sandbox_default: str = "auto") -> None:
    """Evaluation options; ``sandbox_default`` is "require" where strangers' code is evaluated (the leaderboard)."""
    from kernelbench.backends import backend_names
    from kernelbench.constants import PRECISIONS, TOLERANCE_MODES
    from kernelbench.evaluation.settings import EvalSettings

    # Every default is EvalSettings' own, so the command line and the library cannot drift apart.
    g = p.add_argument_group("evaluation")
    # (evaluate-run and run default backend, precision and tolerance mode to None: run.json's, else these.)
    g.add_argument("--backend", choices=backend_names(), default=EvalSettings.backend, help="what the candidate is written in")
    g.add_argument("--precision", choices=PRECISIONS, default=EvalSettings.precision,
                   help="precision of inputs and weights")
    g.add_argument("--correctness-trials", type=positive_int, default=EvalSettings.correctness_trials,
                   help="fresh-input correctness trials")
    g.add_argument("--tolerance-mode", choices=TOLERANCE_MODES, default=EvalSettings.tolerance_mode,
                   help="default: 1e-4 for fp32, 1e-2 for fp16/bf16; kernelbench-v0.1: 1e-2 everywhere")
    g.add_argument("--no-timing", action="store_true", help="check correctness only")
    g.add_argument("--timing-budget", type=positive_float, default=EvalSettings.timing_budget_s,
                   help="seconds of timed calls per side (default %(default)s)")
    g.add_argument("--device", default=None, help="cuda:N or cpu (default: first GPU, else CPU)")
    s = p.add_argument_group("isolation of candidate code (docs/threat-model.md)")
    x = s.add_mutually_exclusive_group()
    x.add_argument("--require-sandbox", dest="sandbox", action="store_const", const="require",
                   help="refuse to evaluate unless candidates run in the OS sandbox (bubblewrap)"
                        + (" (the default here)" if sandbox_default == "require" else ""))
    x.add_argument("--no-sandbox", dest="sandbox", action="store_const", const="off",
                   help="process isolation only: candidate code can read what this user can read")
    if sandbox_default != "auto":
        x.add_argument("--sandbox-if-possible", dest="sandbox", action="store_const", const="auto",
                       help="the OS sandbox where it can be made, else process isolation (said once; every result "
                            "records which, as environment.isolation)")
    s.add_argument("--allow-network", action="store_true",
                   help="let sandboxed candidates reach the network (default: none at all)")
    p.set_defaults(sandbox=sandbox_default)


def eval_settings_from_args(args: argparse.Namespace):
    from kernelbench.evaluation.settings import EvalSettings

    return EvalSettings(
        backend=args.backend, precision=args.precision, correctness_trials=args.correctness_trials,
        tolerance_mode=args.tolerance_mode, measure_timing=not args.no_timing,
        timing_budget_s=args.timing_budget, device=args.device,
        sandbox=args.sandbox, allow_network=args.allow_network,
    )
