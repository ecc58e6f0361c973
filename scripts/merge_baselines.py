#!/usr/bin/env python3
"""Join baseline files measured in parts (one per GPU of a host, disjoint levels) into one.

    python scripts/merge_baselines.py baselines/kernelbench/H100.json H100-gpu1.json [more.json ...]

The first file is extended in place with every time the others hold and it lacks (a time both hold stays
the first file's). Files of another GPU type, timing protocol, precision or problem set, or holding another
version of a problem, are refused before anything is written. Prints how many times each file added.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelbench.baselines.writer import BaselineFile
from kernelbench.errors import BaselineError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("into", help="baseline file to extend (written in place)")
    ap.add_argument("parts", nargs="+", help="baseline files whose times to take in")
    ap.add_argument("--modes", nargs="+", help="only these modes (default: every mode)")
    ap.add_argument("--dry-run", action="store_true", help="check and count, write nothing")
    args = ap.parse_args(argv)
    missing = [p for p in [args.into, *args.parts] if not Path(p).is_file()]
    if missing:
        print(f"error: no such baseline file: {missing[0]}", file=sys.stderr)
        return 2
    try:
        # precision=None: each file opens as what it holds; merge_from refuses two that differ
        into = BaselineFile.open(args.into, precision=None)
        parts = [BaselineFile.open(p, precision=None) for p in args.parts]
        counts = [into.merge_from(part, modes=args.modes, save=False) for part in parts]
    except BaselineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for part, n in zip(parts, counts):
        print(f"{part.path}: {n} times added")
    if not args.dry_run:
        into.save()
    for mode in ["eager", *(into.data.get("modes") or {})]:
        print(f"{into.path} {mode}: {into.count(mode)} times" + (" (not written: --dry-run)" if args.dry_run else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
