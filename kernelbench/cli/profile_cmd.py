"""``kernelbench profile``: one candidate's forward under Nsight Compute, per kernel, in the sandbox.

Prints the compact profile a refinement prompt carries (``--feedback profile``); ``--json PATH`` writes the
full report (``--json`` alone: to stdout, which then holds only the JSON). Exits 2 with one line when no profile can be taken here (no GPU, no ``ncu``, no permission to read
the GPU's counters, the backend's package missing, a candidate that fails to run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelbench.cli.common import add_json_arg, add_source_args, level_type, positive_float


def register(sub: argparse._SubParsersAction) -> None:
    from kernelbench.backends import backend_names
    from kernelbench.constants import PRECISIONS

    p = sub.add_parser(
        "profile", help="profile one candidate kernel file under Nsight Compute (ncu)",
        description="Run one forward of a candidate under Nsight Compute, in the sandbox, and report per kernel: "
                    "duration, memory and compute throughput as a share of peak, occupancy and the limiting "
                    "factor, plus the forward's share of the speed-of-light bound. Needs a local NVIDIA GPU and "
                    "ncu; exits 2 with one line when either is missing or profiling is not permitted.",
    )
    p.add_argument("--level", type=level_type, required=True)
    p.add_argument("--problem-id", type=int, required=True)
    p.add_argument("--kernel", required=True, help="candidate source file defining ModelNew")
    p.add_argument("--backend", choices=("auto", *backend_names()), default="auto",
                   help="what the candidate is written in (default: detected from its imports)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help="precision of inputs and weights")
    p.add_argument("--device", default="cuda:0", help="GPU to profile on (default cuda:0)")
    p.add_argument("--ncu", default=None, help="the ncu binary (default: $KERNELBENCH_NCU, ncu on PATH, the CUDA toolkit's)")
    p.add_argument("--timeout", type=positive_float, default=600.0, help="seconds before ncu is stopped (600)")
    add_json_arg(p, "the full report")
    p.add_argument("--keep-csv", default=None, metavar="PATH", help="also keep ncu's raw CSV log here")
    s = p.add_argument_group("isolation of candidate code (docs/threat-model.md)")
    x = s.add_mutually_exclusive_group()
    x.add_argument("--require-sandbox", dest="sandbox", action="store_const", const="require",
                   help="refuse to profile unless the candidate runs in the OS sandbox (bubblewrap)")
    x.add_argument("--no-sandbox", dest="sandbox", action="store_const", const="off",
                   help="process isolation only: needed where the driver lets only administrators read the GPU's "
                        "counters (the sandbox runs candidates as an unprivileged user)")
    p.set_defaults(sandbox="auto", func=run)
    add_source_args(p)


def run(args: argparse.Namespace) -> int:
    from kernelbench.backends import DEFAULT_BACKEND, detect_backend
    from kernelbench.cli.common import read_kernel_file, stdout_for_json, write_json
    from kernelbench.errors import KernelBenchError
    from kernelbench.problems import load_problems
    from kernelbench.profiling import ProfileOptions, ProfileUnavailable, profile_candidate

    path = Path(args.kernel)
    source = read_kernel_file(args.kernel)
    problem = load_problems(args.source, args.path, levels=[args.level]).get(args.level, args.problem_id)
    backend = (detect_backend(source) or DEFAULT_BACKEND) if args.backend == "auto" else args.backend
    print(f"profiling {path} ({backend}) on level {problem.level} problem {problem.problem_id} ({problem.name})",
          file=sys.stderr, flush=True)
    options = ProfileOptions(device=args.device, sandbox=args.sandbox, ncu=args.ncu, timeout_s=args.timeout,
                             keep_csv=args.keep_csv)
    with stdout_for_json(args):
        try:
            report = profile_candidate(problem, source, backend, args.precision, options)
        except ProfileUnavailable as e:
            raise KernelBenchError(f"profile unavailable: {e}") from None
        print(report.to_text(), end="")
    write_json(args, report.model_dump_json(indent=2))
    return 0
