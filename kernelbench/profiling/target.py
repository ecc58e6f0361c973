"""The process Nsight Compute profiles: a problem's inputs, the candidate's ``ModelNew``, one forward.

``python -m kernelbench.profiling.target SPEC.json`` (started by :mod:`kernelbench.profiling.run`, under ncu,
inside the sandbox when there is one). It builds ``ModelNew`` and the inputs the way the evaluator's
workers do (same seeds, device and precision), runs ``forward`` a few times to compile and warm up, and
then once more between ``cudaProfilerStart`` and ``cudaProfilerStop``: with ``--profile-from-start off``
only that forward's kernels are profiled. It reports its own failure in ``status.json`` beside the spec
(never on stdout, which the candidate shares).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path


def run(spec: dict) -> None:
    import torch

    from kernelbench.evaluation import compile_cache, inputs

    device = torch.device(spec["device"])
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default, as in the evaluator
    compile_cache.set_scope(spec["cache_scope"])
    compile_cache.install()  # a CUDA extension the evaluator built already is loaded, not rebuilt
    problem = inputs.load_module(Path(spec["problem"]).read_text(encoding="utf-8"), "kb_problem", "<problem>")
    candidate = inputs.load_module(Path(spec["candidate"]).read_text(encoding="utf-8"), "kb_candidate", "<candidate>")
    model_cls = getattr(candidate, "ModelNew", None)
    if not isinstance(model_cls, type):
        raise TypeError("the candidate defines no class ModelNew")
    model = inputs.build_model(model_cls, problem.get_init_inputs, int(spec["init_seed"]), device, spec["precision"])
    if isinstance(model, torch.nn.Module):
        model.eval()
    args = inputs.make_inputs(problem.get_inputs, int(spec["input_seed"]), device, spec["precision"])
    with torch.no_grad():
        for _ in range(int(spec["warmup"])):  # JIT compilation and first-call work stay out of the profile
            model(*args)
        torch.cuda.synchronize(device)
        torch.cuda.cudart().cudaProfilerStart()
        model(*args)
        torch.cuda.synchronize(device)
        torch.cuda.cudart().cudaProfilerStop()


def main(argv: list[str]) -> int:
    spec_path = Path(argv[0])
    status_path = spec_path.with_name("status.json")
    try:
        run(json.loads(spec_path.read_text(encoding="utf-8")))
    except BaseException as e:  # the candidate's failure, reported to the parent, never raised past here
        status_path.write_text(json.dumps({"ok": False, "type": type(e).__name__, "message": str(e)[:2000],
                                           "traceback": traceback.format_exc()[-4000:]}))
        return 3
    status_path.write_text(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
