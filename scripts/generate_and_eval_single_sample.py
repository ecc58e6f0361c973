"""Generate and evaluate one problem (KernelBench's ``generate_and_eval_single_sample.py`` arguments).

    python scripts/generate_and_eval_single_sample.py dataset_src=builtin level=1 problem_id=19 \\
        server_type=sglang model_name=Qwen3-8B backend=triton

Runs ``kernelbench single``: prints the generated kernel and its verdict; the prompt, reply and
result are kept under logdir (default runs/single/...).
"""

from __future__ import annotations

import sys

import _kv
from _kv import REQUIRED, Key

PROG = "generate_and_eval_single_sample.py"
_LOGGING = "the prompt, the reply, the kernel and the result are always written to the run folder"
KEYS = [
    *_kv.dataset_keys(),
    Key("level", "int", REQUIRED, "level of the problem"),
    Key("problem_id", "int", REQUIRED, "problem id (the file-name prefix)"),
    *_kv.model_keys(),
    *_kv.prompt_keys(),
    *_kv.eval_keys(),
    Key("eval_device", "int", None, "local GPU index to evaluate on"),
    Key("backend", "str", "cuda", "cuda or triton"),
    Key("precision", "str", "fp32", "fp32, fp16 or bf16"),
    Key("turns", "int", 1, "refinement turns (the verdict goes back to the model)"),
    Key("logdir", "str", None, "folder for this attempt's files (default runs/single/...)"),
    Key("log", "bool", False, "write logs", ignored=_LOGGING),
    Key("log_prompt", "bool", False, "write the prompt", ignored=_LOGGING),
    Key("log_generated_kernel", "bool", False, "write the kernel", ignored=_LOGGING),
    Key("log_eval_result", "bool", False, "write the result", ignored=_LOGGING),
    Key("verbose_logging", "bool", False, "more log output"),
    Key("verbose", "bool", False, "more log output"),
]


def build_argv(args: _kv.KvArgs) -> list[str]:
    argv = [*_kv.verbosity(args), "single", "--level", str(args.level), "--problem-id", str(args.problem_id)]
    argv += _kv.source_options(args.dataset_src, args.dataset_name, args.dataset_path)
    argv += _kv.model_options(args)
    prompt = _kv.prompt_options(args)
    if args.include_hardware_info:
        argv += ["--target-gpu", prompt[1]]
    elif (args.eval_mode or "local").lower() == "local":
        argv += ["--target-gpu", "none"]
    argv += _kv.eval_options(args)
    argv += ["--backend", str(args.backend), "--precision", str(args.precision), "--turns", str(args.turns)]
    if args.eval_device is not None:
        argv += ["--device", f"cuda:{args.eval_device}"]
    _kv.add(argv, "--run-dir", args.logdir)
    return argv


def main(argv: list[str] | None = None) -> int:
    return _kv.script_main(PROG, __doc__, KEYS, build_argv, argv)


if __name__ == "__main__":
    sys.exit(main())
