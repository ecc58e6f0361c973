"""Entry point of the ``kernelbench`` command.

Each verb lives in its own module exposing ``register(subparsers)``; the module must keep heavy
imports (torch, litellm, modal, datasets) inside its handler so ``--help`` stays fast.
Handlers return an exit code. A ``KernelBenchError`` becomes a one-line error and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelbench",
        description="Evaluate LLM-written GPU kernels against PyTorch references (KernelBench-compatible).",
    )
    parser.add_argument("--version", action="version", version=f"kernelbench {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(args.func(args) or 0)
    except DispatchDeclined as e:  # --dry-run is a success; a declined or capped dispatch is not
        print(f"{'' if e.dry_run else 'error: '}{e}", file=sys.stderr)
        return 0 if e.dry_run else 2
    except KernelBenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; results written so far are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `kernelbench problems list | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
