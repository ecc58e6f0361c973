"""Generate kernels for one level with a model (KernelBench's ``generate_samples.py`` arguments).

    python scripts/generate_samples.py run_name=my_run dataset_src=builtin level=1 \\
        server_type=deepseek model_name=deepseek-chat num_workers=8 temperature=0

Runs ``kernelbench generate``; kernels land in runs/<run_name>/ under KernelBench's file names, and a
rerun skips samples that already have a kernel.
"""

from __future__ import annotations

import sys

import _kv
from _kv import REQUIRED, Key

PROG = "generate_samples.py"
KEYS = [
    Key("run_name", "str", REQUIRED, "run name; files go to <runs_dir>/<run_name>/"),
    Key("runs_dir", "str", "runs", "parent folder of runs"),
    *_kv.dataset_keys(),
    Key("level", "int", REQUIRED, "level to generate for"),
    Key("subset", "list", None, "problem ids: (start, end) inclusive, or a list"),
    Key("problem_ids", "list", None, "problem ids to run, e.g. [71,86,95] (KernelBench's key)"),
    Key("num_workers", "int", None, "requests in flight at once (default 4)"),
    Key("api_query_interval", "float", 0.0, "pause between requests",
        ignored="use num_workers to limit the request rate; rate limits are retried with back-off"),
    *_kv.model_keys(),
    Key("num_samples", "int", 1, "samples per problem (pass@k)"),
    Key("backend", "str", "cuda", "cuda or triton"),
    Key("precision", "str", "fp32", "fp32, fp16 or bf16"),
    *_kv.prompt_keys(),
    Key("log_prompt", "bool", False, "save prompts", ignored="prompts are always saved beside the kernels"),
    Key("store_type", "str", "local", "where results go", ignored="runs are always stored on the local disk"),
    Key("verbose", "bool", False, "more log output"),
    _kv.check_kernel_key(),
]


def build_argv(args: _kv.KvArgs) -> list[str]:
    from pathlib import Path

    argv = [*_kv.verbosity(args), "generate", "--level", str(args.level),
            "--run-dir", str(Path(args.runs_dir) / args.run_name)]
    argv += _kv.source_options(args.dataset_src, args.dataset_name, args.dataset_path)
    _kv.add(argv, "--problem-ids", _kv.ids_option(args))
    _kv.add(argv, "--concurrency", args.num_workers)
    argv += _kv.model_options(args)
    argv += ["--samples", str(args.num_samples), "--backend", str(args.backend), "--precision", str(args.precision)]
    argv += _kv.prompt_options(args)
    _kv.check_kernel_option(args)
    return argv


def main(argv: list[str] | None = None) -> int:
    return _kv.script_main(PROG, __doc__, KEYS, build_argv, argv)


if __name__ == "__main__":
    sys.exit(main())
