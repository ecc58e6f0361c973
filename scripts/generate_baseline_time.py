"""Measure reference (PyTorch) times per problem on this GPU (KernelBench's ``generate_baseline_time.py``, with arguments).

    python scripts/generate_baseline_time.py level=1 hardware_name=H100 num_runs=100
    python scripts/generate_baseline_time.py level=[1,2,3,4] modes=eager,compile-default
    python scripts/generate_baseline_time.py level=4 dataset_src=huggingface

KernelBench's script takes no arguments and has its levels and hardware name written into its
source; here they are keys, level 4 included. Like KernelBench's, run from a KernelBench checkout it
measures the problems of its ``KernelBench/`` folder (the official set when they hash as pinned); elsewhere
say dataset_src= (without either it measures the built-in suite and says so). Runs ``kernelbench baselines``
and writes baselines/kernelbench/<hardware_name>.json for the official set, baselines/<hardware_name>.json
for the built-in suite (or output_file=...): eager times at the top level, as KernelBench's files have
them, torch.compile modes under "modes". Resumable: run it again to continue.

num_runs=N asks for N timed calls per problem and mode (at least N; the last block of calls may add a
few), with up to 300 s per measurement unless timing_budget= says otherwise. Without num_runs, timing
stops once the median is precise to 0.5% or timing_budget (default 1 s) is spent, as evaluation does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _kv
from _kv import Key

from kernelbench.evaluation.settings import EvalSettings
from kernelbench.runners import runner_names

PROG = "generate_baseline_time.py"
MODES = ("eager", "compile-default", "compile-max-autotune", "compile-cudagraphs")
#: KernelBench's file names for its torch.compile baselines, accepted as mode names.
MODE_ALIASES = {"torch": "eager", "compile": "compile-default", "inductor": "compile-default",
                "compile_inductor_default": "compile-default", "max-autotune": "compile-max-autotune",
                "compile_inductor_max-autotune": "compile-max-autotune",
                "compile_inductor_max-autotune-no-cudagraphs": "compile-max-autotune",
                "cudagraphs": "compile-cudagraphs", "compile_cudagraphs": "compile-cudagraphs"}
NUM_RUNS_BUDGET_S = 300.0

KEYS = [
    Key("level", "list", None, "level or levels to measure: 1 or [1,2,3,4] (default: all levels of the source)"),
    Key("hardware_name", "str", None, "GPU name for the file, e.g. H100 (default: this machine's GPU)"),
    Key("num_runs", "int", None, "timed calls per problem and mode (default: adaptive, see above)"),
    Key("num_trials", "int", None, "same as num_runs"),
    Key("modes", "list", None, f"modes to measure: {', '.join(MODES)} or all (default all)"),
    Key("problem_id", "list", None, "only these problem ids, e.g. 1,3 or [1,3]"),
    Key("subset", "list", None, "(start, end) problem ids, inclusive"),
    *_kv.dataset_keys(src_default=None),
    Key("output_file", "str", None, "baseline file to write (default <baselines_dir>/<hardware_name>.json)"),
    Key("baselines_dir", "str", None, "folder of per-GPU baseline files (default baselines/kernelbench for the "
        "official set, baselines otherwise)"),
    Key("timing_budget", "float", None,
        f"seconds of timed calls per problem and mode (default {EvalSettings.timing_budget_s:g})"),
    Key("compile_timeout", "float", None,
        f"seconds to build one reference, torch.compile included (default {EvalSettings.compile_timeout_s:g})"),
    Key("precision", "str", "fp32", "fp32, fp16 or bf16"),
    Key("device", "str", None, "cuda:N (default: the first GPU); cpu for testing only"),
    Key("eval_mode", "str", "local", "local (this machine's GPU) or modal"),
    Key("gpu", "str", "H100", "GPU type for eval_mode=modal: H100, A100-80GB, L40S, B200"),
    Key("restart", "bool", False, "start the file over instead of resuming"),
    Key("force", "bool", False, "write into a file from another GPU type, protocol or precision anyway"),
    Key("deadline", "float", None, "stop starting new measurements after this many seconds"),
    Key("verbose", "bool", False, "more log output"),
]


def _levels(values: list) -> list[str]:
    out = []
    for v in values:
        try:
            out.append(str(int(v)))
        except (TypeError, ValueError):
            raise _kv.KvError(f"level={values!r}: expected a level number or a list such as [1,2]") from None
    return out


def _modes(values: list) -> list[str]:
    out = []
    for v in values:
        name = str(v).strip()
        name = MODE_ALIASES.get(name, name)
        if name != "all" and name not in MODES:
            raise _kv.KvError(f"modes: unknown mode {v!r} (choose from all, {', '.join(MODES)})")
        out.append(name)
    return out


def build_argv(args: _kv.KvArgs) -> list[str]:
    argv = _kv.verbosity(args) + ["baselines"]
    if args.level is not None:
        argv += ["--levels", *_levels(args.level)]
    _kv.add(argv, "--gpu-name", args.hardware_name)
    if args.modes is not None:
        argv += ["--modes", *_modes(args.modes)]
    if args.problem_id is not None and args.subset is not None:
        raise _kv.KvError("give problem_id= or subset=, not both")
    ids = args.problem_id if args.problem_id is not None else args.subset
    if ids is not None:
        spec = ",".join(str(i) for i in ids) if args.problem_id is not None else _kv.subset_to_ids(ids)
        _kv.add(argv, "--problem-id", spec)
    if args.dataset_src is not None:
        argv += _kv.source_options(args.dataset_src, args.dataset_name, args.dataset_path)
    elif Path("KernelBench").is_dir():  # KernelBench's own script measures its checkout's problems
        argv += _kv.source_options("local", None, None)
    else:
        print(f"{PROG}: note: no dataset_src= and no KernelBench/ folder here: measuring the built-in suite "
              "(dataset_src=builtin says so explicitly)", file=sys.stderr)
        argv += ["--source", "builtin"]
    _kv.add(argv, "--out", args.output_file)
    _kv.add(argv, "--baselines-dir", args.baselines_dir)
    if args.num_runs is not None and args.num_trials is not None and args.num_runs != args.num_trials:
        raise _kv.KvError("num_runs and num_trials disagree; give one")
    runs = args.num_runs if args.num_runs is not None else args.num_trials
    budget = args.timing_budget
    if runs is not None:
        if runs < 1:
            raise _kv.KvError(f"num_runs={runs}: expected a positive number of timed calls")
        argv += ["--min-trials", str(runs), "--max-trials", str(runs)]
        budget = budget if budget is not None else NUM_RUNS_BUDGET_S
    _kv.add(argv, "--timing-budget", budget)
    _kv.add(argv, "--compile-timeout", args.compile_timeout)
    _kv.add(argv, "--precision", args.precision)
    _kv.add(argv, "--device", args.device)
    mode = (args.eval_mode or "local").lower()
    if mode not in runner_names():
        raise _kv.KvError(f"eval_mode={args.eval_mode}: choose {' or '.join(runner_names())}")
    argv += ["--runner", mode]
    if mode == "modal":
        argv += ["--gpu", str(args.gpu or "H100")]
    if args.restart:
        argv.append("--restart")
    if args.force:
        argv.append("--force")
    _kv.add(argv, "--deadline", args.deadline)
    return argv


def main(argv: list[str] | None = None) -> int:
    return _kv.script_main(PROG, __doc__, KEYS, build_argv, argv)


if __name__ == "__main__":
    sys.exit(main())
