"""Check one kernel file against a reference (KernelBench's ``run_and_check.py`` arguments).

    python scripts/run_and_check.py ref_origin=kernelbench dataset_src=builtin level=1 problem_id=8 \\
        kernel_src_path=my_relu.py backend=triton
    python scripts/run_and_check.py ref_origin=local ref_arch_src_path=model.py kernel_src_path=model_new.py \\
        eval_mode=modal gpu=H100

Runs ``kernelbench single --kernel``: prints the kernel's verdict, its runtime and the in-session
reference runtime. A local reference file is evaluated as a one-problem KernelBench folder.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

import _kv
from _kv import REQUIRED, Key

PROG = "run_and_check.py"
KEYS = [
    Key("ref_origin", "str", REQUIRED, "local (ref_arch_src_path) or kernelbench (level, problem_id)"),
    Key("ref_arch_src_path", "str", None, "reference program file (Model, get_inputs, get_init_inputs)"),
    *_kv.dataset_keys(src_default="huggingface"),
    Key("level", "int", None, "level, with ref_origin=kernelbench"),
    Key("problem_id", "int", None, "problem id, with ref_origin=kernelbench"),
    Key("kernel_src_path", "str", REQUIRED, "candidate file defining ModelNew"),
    *_kv.eval_keys(),
    Key("backend", "str", "cuda", "cuda, triton or torch"),
    Key("precision", "str", "fp32", "fp32, fp16 or bf16"),
    Key("build_dir_prefix", "str", "", "build folder", ignored="the build cache is managed by the evaluator"),
    Key("clear_cache", "bool", False, "fresh build", ignored="builds are keyed by source, toolchain and GPU"),
    Key("verbose", "bool", False, "more log output"),
]


def build_argv(args: _kv.KvArgs, workdir: Path) -> list[str]:
    kernel = Path(args.kernel_src_path)
    if not kernel.is_file():
        raise _kv.KvError(f"kernel_src_path={kernel}: no such file")
    argv = [*_kv.verbosity(args), "single", "--kernel", str(kernel)]
    origin = (args.ref_origin or "").lower()
    if origin == "local":
        if not args.ref_arch_src_path:
            raise _kv.KvError("ref_origin=local needs ref_arch_src_path=<file>")
        ref = Path(args.ref_arch_src_path)
        if not ref.is_file():
            raise _kv.KvError(f"ref_arch_src_path={ref}: no such file")
        level = args.level or 1
        m = re.match(r"^(\d+)_", ref.name)
        pid = int(m.group(1)) if m else 1
        name = ref.name if m else f"{pid}_{ref.stem}.py"
        folder = workdir / f"level{level}"
        folder.mkdir(parents=True)
        shutil.copyfile(ref, folder / name)
        argv += ["--level", str(level), "--problem-id", str(pid), "--source", "directory", "--path", str(workdir)]
    elif origin == "kernelbench":
        if args.level is None or args.problem_id is None:
            raise _kv.KvError("ref_origin=kernelbench needs level=... and problem_id=...")
        argv += ["--level", str(args.level), "--problem-id", str(args.problem_id)]
        argv += _kv.source_options(args.dataset_src, args.dataset_name, args.dataset_path)
    else:
        raise _kv.KvError(f"ref_origin={args.ref_origin}: choose local or kernelbench")
    argv += _kv.eval_options(args)
    argv += ["--backend", str(args.backend), "--precision", str(args.precision)]
    return argv


def main(argv: list[str] | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="kb-run-and-check-") as tmp:
        return _kv.script_main(PROG, __doc__, KEYS, lambda args: build_argv(args, Path(tmp)), argv)


if __name__ == "__main__":
    sys.exit(main())
