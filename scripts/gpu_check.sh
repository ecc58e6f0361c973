#!/usr/bin/env bash
# GPU checks for the device machine (no network there): install carried wheels, run the GPU test
# suite and the benchmarks, write every log under $OUT (default gpu-logs/).
#
#   bash scripts/gpu_check.sh tests        # pytest -m gpu
#   bash scripts/gpu_check.sh bench        # evaluator benchmarks (identity over the built-in suite, ...)
#   bash scripts/gpu_check.sh baselines    # measure baselines/<GPU>.json for the built-in suite
#   bash scripts/gpu_check.sh all
#
# Wheels for what the GPU image lacks (pydantic and its deps) go in .whl/ (see docs/benchmarks.md).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kb-site .whl/*.whl \
    && export PYTHONPATH=/tmp/kb-site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
what=${1:-all}
shift || true
status=0

run() {  # run NAME CMD... : tee output to $OUT/NAME.log, remember failures
  local name=$1; shift
  echo "=== $name: $*" | tee "$OUT/$name.log"
  "$@" 2>&1 | tee -a "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name exit $rc" | tee -a "$OUT/$name.log"
  [ "$rc" -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv | tee "$OUT/gpu.txt"

if [ "$what" = tests ] || [ "$what" = all ]; then
  run gpu-tests python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=15 "$@"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  run bench-identity python3 scripts/bench_evaluator.py --levels 1 2 3 --out "$OUT/bench_identity.json"
  run bench-repeat python3 scripts/bench_evaluator.py --level 3 --problem-id 3 --repeat 5 --out "$OUT/bench_repeat.json"
  run bench-builds python3 scripts/bench_cuda_builds.py --out "$OUT/bench_builds.json"
fi
if [ "$what" = baselines ] || [ "$what" = all ]; then
  if [ -f scripts/bench_baselines.py ]; then
    run bench-baselines python3 scripts/bench_baselines.py --out "$OUT/bench_baselines.json"
  fi
fi
exit $status
