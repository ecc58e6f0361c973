"""Evaluate the kernels of a run (KernelBench's ``eval_from_generations.py`` arguments).

    python scripts/eval_from_generations.py run_name=my_run dataset_src=local level=1 num_gpu_devices=8 timeout=300
    python scripts/eval_from_generations.py run_name=my_run level=1 eval_mode=modal gpu=H100 dataset_src=builtin

Runs ``kernelbench evaluate-run``: every kernel without a result is evaluated, results go to
runs/<run_name>/eval_results.json as they arrive, and a rerun resumes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _kv
from _kv import REQUIRED, Key

PROG = "eval_from_generations.py"
KEYS = [
    Key("run_name", "str", REQUIRED, "run to evaluate (<runs_dir>/<run_name>)"),
    Key("runs_dir", "str", "runs", "parent folder of runs"),
    *_kv.dataset_keys(),
    Key("level", "int", REQUIRED, "level of the run"),
    Key("subset", "list", None, "problem ids: (start, end) inclusive, or a list"),
    Key("problem_ids", "list", None, "problem ids to run, e.g. [71,86,95] (KernelBench's key)"),
    *_kv.eval_keys(),
    Key("num_gpu_devices", "int", None, "use the first N local GPUs (default: all)"),
    Key("backend", "str", None, "cuda, triton or torch (default: what the run was generated with)"),
    Key("precision", "str", None, "fp32, fp16 or bf16 (default: what the run was generated with)"),
    Key("build_cache", "bool", False, "build CUDA kernels ahead on the CPU",
        ignored="kernels are always built ahead, in parallel, into a content-keyed cache"),
    Key("num_cpu_workers", "int", None, "parallel builds", ignored="all CPU cores build in parallel"),
    Key("kernel_eval_build_dir", "str", None, "build folder", ignored="the build cache is managed by the evaluator"),
    Key("num_samples_per_problem", "int", 1, "samples per problem",
        ignored="every sample in the run directory is evaluated"),
    Key("pass_at_k_values", "list", None, "k for pass@k", ignored="benchmark_eval_analysis.py reports pass@k"),
    Key("reevaluate", "bool", False, "evaluate again kernels that already have a result"),
    Key("verbose", "bool", False, "more log output"),
]


def build_argv(args: _kv.KvArgs) -> list[str]:
    run_dir = Path(args.runs_dir) / args.run_name
    argv = [*_kv.verbosity(args), "evaluate-run", "--run-dir", str(run_dir), "--level", str(args.level)]
    argv += _kv.source_options(args.dataset_src, args.dataset_name, args.dataset_path, run_dir=run_dir)
    _kv.add(argv, "--problem-ids", _kv.ids_option(args))
    argv += _kv.eval_options(args)
    if (args.eval_mode or "local").lower() == "local":
        _kv.add(argv, "--num-gpus", args.num_gpu_devices)
    _kv.add(argv, "--backend", args.backend)
    _kv.add(argv, "--precision", args.precision)
    if args.reevaluate:
        argv.append("--reevaluate")
    return argv


def main(argv: list[str] | None = None) -> int:
    return _kv.script_main(PROG, __doc__, KEYS, build_argv, argv)


if __name__ == "__main__":
    sys.exit(main())
