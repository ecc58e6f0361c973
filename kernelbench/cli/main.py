"""Entry point of the ``kernelbench`` command.

Each verb lives in its own module exposing ``register(subparsers)``; the module must keep heavy
imports (torch, litellm, modal, datasets) inside its handler so ``--help`` stays fast.
Handlers return an exit code (:data:`EXIT_CODES`, shown in ``--help``): 1 when what the command checks
failed, 2 for bad input (a ``KernelBenchError`` becomes a one-line error), 3 for a crash of our own
(one line on stderr, the traceback in a file, or on stderr with ``--debug``), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import tempfile
import textwrap
import traceback

from kernelbench import __version__
from kernelbench.errors import DispatchDeclined, KernelBenchError

# (verb, module). Order is the order shown in --help.
COMMANDS: list[tuple[str, str]] = [
    ("demo", "kernelbench.cli.demo"),
    ("problems", "kernelbench.cli.problems"),
    ("eval", "kernelbench.cli.eval_cmd"),
    ("evaluate-run", "kernelbench.cli.evaluate_run"),
    ("analyze", "kernelbench.cli.analyze"),
    ("prompt", "kernelbench.cli.prompt"),
    ("generate", "kernelbench.cli.generate"),
    ("run", "kernelbench.cli.run_cmd"),
    ("single", "kernelbench.cli.single"),
    ("baselines", "kernelbench.cli.baselines"),
    ("roofline", "kernelbench.cli.roofline"),
    ("profile", "kernelbench.cli.profile_cmd"),
    ("guard", "kernelbench.cli.guard"),
    ("leaderboard", "kernelbench.cli.leaderboard"),
    ("serve", "kernelbench.cli.serve"),
]

log = logging.getLogger("kernelbench")

#: Exit status -> meaning, for every command (the epilog of ``kernelbench --help``; docs/cli.md).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_FAILED: "what the command checks failed, or its work is not complete (a submission or guard report "
                 "with errors, a demo verdict not as expected, baselines --strict with failures, leaderboard "
                 "evaluate with kernels left to evaluate); what it found is written",
    EXIT_BAD_INPUT: "bad input: wrong usage, or a one-line error about the input or setup (a missing file, an "
                    "unknown problem, a Modal token that is not there)",
    EXIT_INTERNAL: "internal error (a bug, not your input): one line on stderr and the traceback in a file it "
                   "names; --debug prints the traceback instead",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); results written so far are kept",
}


def _epilog() -> str:
    return "exit status:\n" + "\n".join(
        textwrap.fill(meaning, width=90, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7)
        for code, meaning in EXIT_CODES.items())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelbench",
        description="Evaluate LLM-written GPU kernels against PyTorch references (KernelBench-compatible).",
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kernelbench {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, print the full traceback (an internal error otherwise writes it to a file)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for _verb, module_name in COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name == module_name:
                continue  # verb not built yet
            raise
        module.register(sub)
    return parser


def configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _internal_error(e: BaseException, debug: bool) -> int:
    """A crash of our own: one line that says so, and the traceback where it can be read (never lost)."""
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    if debug:
        sys.stderr.write(text)
        where = "traceback above"
    else:
        try:
            fd, path = tempfile.mkstemp(prefix="kernelbench-crash-", suffix=".txt")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            where = f"traceback in {path}; --debug prints it"
        except OSError:  # nowhere to write it: show it rather than lose it
            sys.stderr.write(text)
            where = "traceback above"
    message = str(e).strip().splitlines()[0] if str(e).strip() else ""
    print(f"kernelbench: internal error (a bug, not your input): {type(e).__name__}"
          + (f": {message}" if message else "") + f" ({where})", file=sys.stderr)
    return EXIT_INTERNAL


def main(argv: list[str] | None = None) -> int:
    from kernelbench.cli.common import stdout_for_json

    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_OK if args.command is None else EXIT_BAD_INPUT
    try:
        with stdout_for_json(args):
            return int(args.func(args) or 0)
    except DispatchDeclined as e:  # --dry-run is a success; a declined or capped dispatch is not
        print(f"{'' if e.dry_run else 'error: '}{e}", file=sys.stderr)
        return EXIT_OK if e.dry_run else EXIT_BAD_INPUT
    except KernelBenchError as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted; results written so far are kept", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `kernelbench problems list | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_OK
    except Exception as e:  # everything else is ours: a bug, not the user's input
        return _internal_error(e, args.debug)


if __name__ == "__main__":
    sys.exit(main())
