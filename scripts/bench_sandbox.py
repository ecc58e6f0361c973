#!/usr/bin/env python
"""What the OS sandbox costs per candidate: start a candidate worker (Python, torch, the worker's imports)
and have it import a small candidate, confined and not, in alternation.

    python scripts/bench_sandbox.py --repeat 8 [--device cpu] [--out sandbox.json]

Prints the median seconds per step for each isolation level and the difference; the whole-sweep
figure (scripts/bench_evaluator.py --sandbox require / off) needs a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import _checkout  # noqa: F401  (this checkout first on the path)

from kernelbench.evaluation import isolation, protocol
from kernelbench.evaluation.parent.workers import call, start_worker
from kernelbench.evaluation.sandbox import Confinement
from kernelbench.evaluation.seeds import INIT_SEED
from kernelbench.problems import load_builtin
from kernelbench.results import Stage

CANDIDATE = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
            "        return torch.relu(x)\n"


def one(confinement: Confinement | None, device: str, problem_code: str) -> dict[str, float]:
    t0 = time.perf_counter()
    w = start_worker("candidate", device, "torch", None, init=False, confinement=confinement)
    started = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        call(w, protocol.Load(problem_code=problem_code, source=CANDIDATE, backend="torch", precision="fp32",
                              init_seed=INIT_SEED, eval_mode=False, cache_namespace=None, cache_scope=None,
                              ieee_fp32=False), protocol.LoadReply, 120, Stage.LOAD, "load")
        loaded = time.perf_counter() - t1
    finally:
        t2 = time.perf_counter()
        w.kill()
        killed = time.perf_counter() - t2
    return {"start_s": started, "load_s": loaded, "kill_s": killed}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=8)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    gpu = args.device.startswith("cuda")
    support = isolation.probe(gpu)
    if not support.available:
        print(support.message(), file=sys.stderr)
        return 2
    conf = Confinement(support.bwrap, False, None)
    code = load_builtin([1]).get(1, 8).code
    rows: dict[str, list[dict[str, float]]] = {"sandbox": [], "process": []}
    for _ in range(args.repeat):  # alternate, so drift in the machine's load hits both alike
        rows["sandbox"].append(one(conf, args.device, code))
        rows["process"].append(one(None, args.device, code))
    print(f"{'step':10} {'sandbox':>9} {'process':>9} {'added':>8}   (median seconds over {args.repeat})")
    summary = {}
    for step in ("start_s", "load_s", "kill_s"):
        a = statistics.median(r[step] for r in rows["sandbox"])
        b = statistics.median(r[step] for r in rows["process"])
        summary[step] = {"sandbox": a, "process": b, "added": a - b}
        print(f"{step:10} {a:9.3f} {b:9.3f} {a - b:+8.3f}")
    total = sum(v["added"] for v in summary.values())
    print(f"added per candidate: {total:+.3f} s")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
