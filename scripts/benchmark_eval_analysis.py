"""Score a run: fast_p, geometric-mean speedup, pass@k (KernelBench's ``benchmark_eval_analysis.py`` arguments).

    python scripts/benchmark_eval_analysis.py run_name=my_run level=1 hardware=H100 baseline=baseline_time_torch
    python scripts/benchmark_eval_analysis.py run_name=my_run level=1 baseline_file=baselines/H100.json

The baseline file is ``baseline_file`` if given, else results/timing/<hardware>/<baseline>.json
(KernelBench's layout), else our baselines folder's file for the run's problem set
(baselines/kernelbench/<hardware>.json or baselines/<hardware>.json); with neither hardware nor baseline the
speedups are those measured against the reference in the same session. Runs ``kernelbench analyze``
and writes runs/<run_name>/analysis_results.json unless output_file says otherwise.

The problem set is dataset_src if given, else what the run's run.json records, else the KernelBench/
folder of the working directory (run it from a KernelBench checkout, as KernelBench's own script is),
else the set the baseline's problem names belong to; when nothing tells, it asks. Beside our scores it
prints fast_p and the geometric mean exactly as KernelBench's own script computes them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _kv
from _kv import REQUIRED, Key

PROG = "benchmark_eval_analysis.py"
KEYS = [
    Key("run_name", "str", REQUIRED, "run to score (<runs_dir>/<run_name>)"),
    Key("runs_dir", "str", "runs", "parent folder of runs"),
    Key("eval_results_dir", "str", None, "KernelBench's name for the parent folder of runs (overrides runs_dir)"),
    Key("dataset_src", "str", None, "problem set: builtin, local (a KernelBench folder) or huggingface "
        "(default: from run.json, ./KernelBench/ or the baseline's problem names)"),
    Key("dataset_name", "str", "ScalingIntelligence/KernelBench", "Hugging Face dataset id or local dataset path"),
    Key("dataset_path", "str", None, "folder with level1/, level2/... for dataset_src=local (default ./KernelBench)"),
    Key("force", "bool", False, "score even against another GPU's baseline or another problem set's"),
    Key("level", "int", REQUIRED, "level of the run"),
    Key("hardware", "str", None, "GPU the baseline was measured on (e.g. H100)"),
    Key("baseline", "str", None, "baseline name under results/timing/<hardware>/ (e.g. baseline_time_torch)"),
    Key("baseline_file", "str", None, "baseline file path (overrides hardware/baseline)"),
    Key("baselines_dir", "str", "baselines", "our baselines folder (<hardware>.json, kernelbench/<hardware>.json)"),
    Key("output_file", "str", None, "where to write the scores (default <run dir>/analysis_results.json)"),
    Key("sample_policy", "str", "first", "first (sample 0, KernelBench) or best (best correct sample)"),
    Key("subset", "list", None, "problem ids to score (not supported: scores cover the whole level)"),
    Key("problem_ids", "list", None, "problem ids to score (not supported: scores cover the whole level)"),
]


def baseline_options(args: _kv.KvArgs) -> list[str]:
    """``--baseline FILE``; or, for our own baselines folder, ``--gpu``: which file of it (the official set's
    ``<baselines_dir>/kernelbench/<hardware>.json`` or ``<baselines_dir>/<hardware>.json``) depends on the
    run's problem set, which analyze finds."""
    from kernelbench.baselines import baseline_path_for_gpu, baselines_dir_for
    from kernelbench.problems.identity import KERNELBENCH

    if args.baseline_file:
        return ["--baseline", str(args.baseline_file)]
    if not args.hardware and not args.baseline:
        return []
    if not args.hardware:
        raise _kv.KvError("baseline= needs hardware= (or give baseline_file=)")
    tried = []
    if args.baseline:
        kb_layout = Path("results") / "timing" / args.hardware / f"{args.baseline}.json"
        if kb_layout.is_file():
            return ["--baseline", str(kb_layout)]
        tried.append(kb_layout)
    ours = [Path(args.baselines_dir) / f"{args.hardware}.json",
            baseline_path_for_gpu(args.hardware, baselines_dir_for(KERNELBENCH, args.baselines_dir))]
    if any(p.is_file() for p in ours):
        return ["--gpu", str(args.hardware), "--baselines-dir", str(args.baselines_dir)]
    tried += ours
    raise _kv.KvError(f"no baseline file: tried {', '.join(map(str, tried))}; pass baseline_file=<path>")


def build_argv(args: _kv.KvArgs) -> list[str]:
    for key in ("subset", "problem_ids"):
        if args.get(key) is not None and _kv.subset_to_ids(args.get(key)) is not None:
            raise _kv.KvError(f"{key}= is not supported: scores are over the whole level (missing kernels count "
                              "as incorrect), so a subset's fast_p could not be compared; evaluate a smaller run "
                              "instead")
    run_dir = Path(args.eval_results_dir or args.runs_dir) / args.run_name
    argv = ["analyze", "--run-dir", str(run_dir), "--level", str(args.level),
            "--sample-policy", str(args.sample_policy),
            "--json", str(args.output_file or run_dir / "analysis_results.json")]
    argv += baseline_options(args)
    if args.dataset_src is not None:
        argv += _kv.source_options(args.dataset_src, args.dataset_name, args.dataset_path, run_dir)
    if args.force:
        argv.append("--force")
    return argv


def main(argv: list[str] | None = None) -> int:
    return _kv.script_main(PROG, __doc__, KEYS, build_argv, argv)


if __name__ == "__main__":
    sys.exit(main())
