"""Counting roofline costs ahead of an evaluation, in a process of its own.

The speed-of-light check after each timed result needs its problem's cost, and counting one takes
seconds for some problems (the recurrent networks of level 3: 8-17 s on a CPU) while the GPU waits.
A batch therefore starts one process that counts the costs of its problems, in the order they will be
evaluated, into the shared cost cache, where the check finds them. A process rather than a thread:
counting redirects stdout and sets torch's default dtype, which are process-wide. The problems' code
is trusted (it is what the reference worker runs), so the process is not sandboxed.

Run as ``python -m kernelbench.roofline.ahead REQUEST.json`` with the file :func:`request`'s text is
written to (deleted once read); it prints nothing, and a problem that cannot be counted is left to the
check (which counts it again and says why).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from pathlib import Path

from kernelbench.problems.model import Problem
from kernelbench.roofline.cost import CostCache, count_cost

log = logging.getLogger(__name__)


def uncounted(problems: Iterable[Problem], cache: CostCache) -> list[Problem]:
    """The problems whose cost the cache lacks, each once, in the order given."""
    seen: set[str] = set()
    out = []
    for p in problems:
        if p.hash not in seen and cache.get(p.hash) is None:
            out.append(p)
        seen.add(p.hash)
    return out


def request(problems: Iterable[Problem], cache_path: Path) -> str:
    """The request file's text: where the cache is, and the problems to count, in order."""
    return json.dumps({"cache": str(cache_path), "problems": [p.to_json() for p in problems]})


def count_into_cache(text: str) -> int:
    """Count every problem of a :func:`request` missing from its cache; returns how many were counted."""
    data = json.loads(text)
    cache = CostCache(Path(data["cache"]))
    counted = 0
    for d in data["problems"]:
        problem = Problem.from_json(d)
        if cache.get(problem.hash) is not None:
            continue
        try:
            cache.put(count_cost(problem))
            counted += 1
        except Exception as e:  # the check counts it again and records why it cannot be counted
            log.debug("could not count %s ahead: %s", problem.key, e)
    return counted


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kernelbench.roofline.ahead REQUEST.json (deleted once read)", file=sys.stderr)
        return 2
    path = Path(args[0])
    text = path.read_text(encoding="utf-8")
    path.unlink(missing_ok=True)
    count_into_cache(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
