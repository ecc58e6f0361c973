#!/usr/bin/env python
"""Benchmark CUDA extension builds: one cold build, 16 different candidates built in parallel
(the batch evaluator's compile workers, one per core), and a warm-cache evaluation.

    python scripts/bench_cuda_builds.py --out builds.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _checkout  # noqa: F401  (this checkout first on the path)

from kernelbench.evaluation import EvalJob, EvalSettings
from kernelbench.evaluation.environment import gpu_compute_capability_from_smi
from kernelbench.evaluation.parent.batch import _compile_job, evaluate
from kernelbench.problems import load_builtin

TEMPLATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
__global__ void scaled_relu_VARIANT(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i] * (1.0f + VARIANT * 0.0f); y[i] = v > 0.f ? v : 0.f; }
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel();
    scaled_relu_VARIANT<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
ext = load_inline(name="bench_relu_VARIANT", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=cuda, functions=["relu_forward"], extra_cuda_cflags=["-O3"], verbose=False)

class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
'''


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parallel", type=int, default=16)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    cache = tempfile.mkdtemp(prefix="kb-build-bench-")
    os.environ["KERNELBENCH_CACHE_DIR"] = cache  # a script, not the library: it owns its environment
    relu = load_builtin([1]).get(1, 8)
    arch = gpu_compute_capability_from_smi()
    settings = EvalSettings(backend="cuda", measure_timing=False)

    def job(i: int) -> EvalJob:
        return EvalJob(relu, TEMPLATE.replace("VARIANT", str(i)), settings, sample_id=i)

    t = time.perf_counter()
    first = _compile_job(job(0), arch)
    one_s = time.perf_counter() - t
    print(f"one build: {one_s:.1f} s (ok={first.ok})", flush=True)
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        many = list(pool.map(lambda i: _compile_job(job(i), arch), range(1, args.parallel + 1)))
    many_s = time.perf_counter() - t
    ok = sum(1 for r in many if r.ok)
    print(f"{args.parallel} builds in parallel: {many_s:.1f} s ({ok} ok)", flush=True)
    cold = evaluate(job(100))
    warm = evaluate(job(100))
    rows = {
        "cores": os.cpu_count(), "one_build_s": one_s, "first_ok": bool(first.ok),
        "parallel": args.parallel, "parallel_builds_s": many_s, "parallel_ok": ok,
        "ratio_parallel_to_one": many_s / one_s,
        "cold_eval_load_s": cold.stage_times_s.get("load"), "warm_eval_load_s": warm.stage_times_s.get("load"),
        "warm_eval_total_s": warm.wall_time_s, "warm_correct": warm.correct,
    }
    for k, v in rows.items():
        print(f"{k:24} {v:.3f}" if isinstance(v, float) else f"{k:24} {v}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
