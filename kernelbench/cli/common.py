"""Options shared by several verbs, so they are spelled the same everywhere."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kernelbench.problems import LEVELS, SOURCES


def add_source_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("problem source")
    g.add_argument("--source", choices=SOURCES, default="builtin",
                   help="where problems come from (default: builtin, the suite shipped with the package)")
    g.add_argument("--path", default=None,
                   help="folder for --source directory (with level1/, level2/...) or a local dataset for "
                        "--source huggingface (default: the hub dataset ScalingIntelligence/KernelBench)")


def level_type(value: str) -> int:
    try:
        lv = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"level must be a number, got {value!r}") from None
    if lv not in LEVELS:
        raise argparse.ArgumentTypeError(f"unknown level {lv} (levels are {', '.join(map(str, LEVELS))})")
    return lv


def positive_int(value: str) -> int:
    try:
        v = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")
