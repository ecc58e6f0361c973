"""``kernelbench prompt``: print the exact prompt a model would get for one problem."""

from __future__ import annotations

import argparse

from kernelbench.cli.common import add_source_args, level_type


def register(sub: argparse._SubParsersAction) -> None:
    from kernelbench.backends import prompt_backends
    from kernelbench.constants import PRECISIONS
    from kernelbench.evaluation.settings import TOLERANCE_MODES, EvalSettings

    p = sub.add_parser(
        "prompt", help="print the prompt for one problem",
        description="Print the exact prompt that generate sends for one problem: the problem, a worked example "
                    "in the backend, the target GPU, the precision and the answer format.",
    )
    p.add_argument("--level", type=level_type, required=True)
    p.add_argument("--problem-id", type=int, required=True)
    p.add_argument("--backend", choices=prompt_backends(), default=EvalSettings.backend, help="kernel language asked for")
    p.add_argument("--precision", choices=PRECISIONS, default=EvalSettings.precision)
    p.add_argument("--tolerance-mode", choices=TOLERANCE_MODES, default=EvalSettings.tolerance_mode)
    p.add_argument("--gpu", default="H100", help="GPU the prompt targets (H100, H200, A100, L40S, B200) or 'none'")
    add_source_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kernelbench.cli.generate import prompt_gpu
    from kernelbench.problems import load_problems
    from kernelbench.prompts import build_prompt

    problem = load_problems(args.source, args.path, levels=[args.level]).get(args.level, args.problem_id)
    print(build_prompt(problem, args.backend, args.precision, prompt_gpu(args.gpu), args.tolerance_mode), end="")
    return 0
