#!/usr/bin/env bash
# GPU checks for the device machine (no network there): install carried wheels, run the GPU test
# suite and the benchmarks, write every log under $OUT (default gpu-logs/).
#
#   bash scripts/gpu_check.sh PHASE [PHASE ...]
#
# Phases (each under its own time limit, so one slow phase cannot take the others' logs with it):
#   tests         pytest -m gpu, the whole GPU suite (over 20 min on an H100: more than one device call)
#   tests-a..d    with basetests, the same suite in parts that each fit a 10-minute call (H100, session 6):
#                 a adversarial corpus and built-in suite; b = evaltests; c = soltests (about 7 min);
#                 d roofline, hardware, rates, generation, leaderboard, Modal worker (about 4 min);
#                 basetests about 3.5 min. a and b together took 11 min.
#   tests-quick   the launch trace, spare and template GPU tests of tests-b alone (timing flags incl. own-kernel share
#                 and the decoy, the forked reference on the GPU, the overlap test; about 2 min)
#   evaltests     the evaluator's GPU tests (failures survived, build cache, IEEE fp32 reference)
#   soltests      worked solutions in-process on the GPU (tests/test_solutions_inprocess.py)
#   dsl           issue 26: install the CuTe DSL and TileLang wheels carried in .dsl-wheels/ (see docs/benchmarks.md,
#                 "CuTe DSL and TileLang on the GPU machine"; without them: one line saying so, and the CuTe/TileLang
#                 GPU tests skip), then their GPU tests: worked examples and solutions correct and timed, the
#                 corpus, a real ncu profile per backend; then scripts/eval_solutions.py over them
#   profile       issue 26: kernelbench profile of every 8_ReLU and 1_Square_matmul worked solution, raw ncu CSV and
#                 report JSON saved under $OUT (ncu_raw_<backend>_<problem>.csv: commit as tests/fixtures/ncu/real_*.csv)
#   solutions     every worked solution through the full evaluator, guards on (scripts/eval_solutions.py)
#   adversarial   the exploit corpus at full size (tests/test_adversarial_runtime.py)
#   memory        level 1 problem 26 (8 GiB of tensors) with every worker step's GPU memory logged
#   identity      scripts/bench_evaluator.py over levels 1-3 (speed and identity precision)
#   issue23       issue 23's GPU tests (speedup intervals, host-bound and own-kernel shares, the decoy, the
#                 worked solutions free of library-output warnings), then bench_evaluator.py over the official
#                 KernelBench levels 1-3 at $KB_OFFICIAL (default kb_official/KernelBench, a local checkout
#                 carried to the device, never committed): prints the per-level counts the issue asks for
#   issue23-bench the bench part alone (about 17 min on H200s for 250 problems: needs KB_PHASE_TIMEOUT and a
#                 device call per level, e.g. KB_LEVELS=3)
#   official-sweep  issue 25's figure: bench_evaluator.py over the official levels $KB_LEVELS (default 1 2 3) on one
#                 GPU, resuming from $KB_SWEEP_RESUME (default runs/sweep/official.json) when that file exists: copy
#                 the official_sweep.json a call brings back there, carry runs/, call again until it ends with the summary
#                 (KB_PROBLEM_IDS="1 2 ..." limits it to those problem numbers of each level)
#   throughput    issue 25: bench_evaluator.py over the first $KB_THROUGHPUT_N (default 40) official problems of
#                 level $KB_LEVELS (default 2), untimed work in turn (--no-overlap), then overlapped; the
#                 per-stage means and GPU-seconds of both runs are the before/after (about 5 min on an H100;
#                 KB_SANDBOX=off|require|auto, default auto: candidates sandboxed where the sandbox works)
#   fingerprint-ab  issue 25: bench_evaluator.py over official level $KB_LEVELS (default 2), problems $KB_PROBLEM_IDS
#                 (default the first $KB_THROUGHPUT_N, 40), with the timed calls' fingerprint through torch operators
#                 (KB_FINGERPRINT=torch), then through the one-pass kernel: per-stage means before and after
#   timing-profile  scripts/profile_timing_stage.py: where a timing stage's time goes between forwards, piece by
#                 piece (official level $KB_LEVELS, default 2, problems 1-10, each with the fingerprint through torch
#                 operators and with the one-pass kernel; KB_FINGERPRINTERS="previous torch current" adds the one
#                 before session 16; about a minute)
#   fingerprint-f32  scripts/bench_fingerprint.py from 10k to 1.6G float32 elements (the float32 path against the
#                 float64 one and the fused kernel) and tests/test_fingerprint_gpu.py
#   fingerprint   one reference worker's start and Init (scripts/probe_worker_init.py: its stacks if Init hangs),
#                 scripts/bench_fingerprint.py (the ways of computing a timed call's output fingerprint, ms per
#                 call at 256M..10k elements; the fused watch's size and cost per check) and the fingerprint's GPU
#                 tests (tests/test_fingerprint_gpu.py, honest candidates end to end with the fused path on)
#   compare       scripts/bench_compare.py (the reference's output comparison and input check through torch
#                 operators and the one-pass kernel, ms per call at 1M..1.6G elements) and tests/test_compare_kernel_gpu.py
#   init-pieces   scripts/probe_init_pieces.py: a fresh process's Init piece by piece (wall and CPU seconds), with the
#                 cuDNN and cuBLAS libraries loaded before the context, and several processes at once
#   init-probe    scripts/probe_init_interference.py: does another process's Init (CUDA context, library warm-up) or exit
#                 disturb a timing (quiet and storm phases, four workloads), and what an Init's pieces cost; then one
#                 worker of each role started and Init'd as the evaluator does (scripts/probe_worker_init.py)
#   repeat        five repeated timings of level 3 problem 3 (timing spread)
#   probe         scripts/probe_placement.py: does GELU's time follow where its buffers land, or the process
#                 (one process with placements kept, 8 processes in turn, 8 alive at once)?
#   recipe        scripts/probe_placement.py --recipes / --offsets: the evaluator's loop against the probe's
#   host          scripts/probe_host.py on the LSTM and GRU (does their time follow the host CPU?) and their
#                 identity, three times each
#   sandbox       the OS sandbox on the GPU: which layout CUDA starts in (scripts/probe_sandbox_gpu.py), its GPU tests, the exploit corpus (CPU tests, run here too) and the
#                 evaluator's GPU tests, all with candidates confined (bubblewrap from .whl/)
#   sandbox-gpu   only the layout probe and tests/test_sandbox_gpu.py
#   demo          scripts/bench_demo.py: the first five minutes (kernelbench demo) on this GPU, three times
#   demo-board    the committed demo leaderboard (examples/demo-board): both worked-solution entries evaluated
#                 afresh on this GPU (built-in suite, today's problems and timing protocol; resumes across calls
#                 while the machine stays warm), then aggregated and built; the new bundles, data/ and site come
#                 back under $OUT/demo-board (see examples/demo-board/README.md for committing them)
#   overhead      the sandbox's cost: bench_evaluator.py over built-in levels 1-3, --sandbox require, then off
#                 (sandboxed outputs through the shared buffer; KB_SANDBOX_TRANSPORT=host for host copies)
#   transport     scripts/bench_host_copies.py: a sandboxed candidate's outputs to the reference (0.5 and 2 GiB), the
#                 reader's mapping per trial / kept / kept and page-locked; then the sandbox's GPU tests (under 2 min)
#   basetests     the baselines' GPU tests (tests/test_baselines_gpu.py)
#   official-baselines  scripts/bench_baselines.py over the official KernelBench levels 1-3 at $KB_OFFICIAL (default
#                 kb_official/KernelBench, carried, never committed) into baselines/kernelbench/<GPU>.json and its
#                 eager repeat, resuming (KB_BASELINE_MODES, default eager; KB_BASELINE_DEADLINE, default 480;
#                 KB_NO_SOL=1 skips the speed-of-light column; KB_NO_REPEAT=1 the second eager run;
#                 KB_BASELINE_OUT=NAME writes baselines/kernelbench/NAME.json instead, e.g. one file per GPU of a
#                 host measuring disjoint KB_LEVELS or KB_PROBLEM_IDS (e.g. 1-50), joined after with
#                 scripts/merge_baselines.py; KB_COMPILE_JOBS sets the compile warm-up's workers). Call it
#                 again until the summary says the file is complete; docs/baselines.md lists what remains and the
#                 command for each mode (e.g. KB_BASELINE_MODES=compile-default KB_NO_SOL=1 on the H100)
#   builds        scripts/bench_cuda_builds.py (warm cache, 16 builds in parallel)
#   rates         scripts/measure_rates.py into kernelbench/data/measured_rates.json (copied to $OUT)
#   baselines     scripts/bench_baselines.py into baselines/<GPU>.json, resuming (KB_BASELINE_MODES,
#                 KB_BASELINE_DEADLINE, KB_BASELINE_SPARES; KB_BASELINE_RESTART=1 starts over, e.g. after a timing-protocol
#                 bump, on the first call only); the file is copied to $OUT
#   server        kernelbench serve on every GPU: its GPU test, then scripts/bench_server.py (KB_SERVER_REQUESTS,
#                 default 96, level-2 requests from 16 clients, about 4 s each on one H100, so the phase fits a
#                 10-minute call; none may be lost); needs fastapi, uvicorn and httpx (wheels in .whl/ if absent)
#   server-start  issue 25's load test, which outlives one device call: scripts/bench_server.py (its own server on
#                 every visible GPU) started under setsid nohup from a snapshot of kernelbench/, scripts/ and the
#                 carried wheels in $KB_LOAD_DIR (default /tmp/kb-load, outside $OUT), and the phase returns at once:
#                 KB_SERVER_REQUESTS (default 500) level-2 requests from KB_SERVER_CLIENTS (default 16) clients,
#                 KB_SERVER_GROUP consecutive requests per problem (default 1), KB_AFFINITY_WINDOW (default: the
#                 server's), KB_SERVER_EXTRA (more bench_server.py arguments, e.g. --gpus 0), killed after
#                 KB_SERVER_LIMIT_S (default 1800). The run goes on between calls while the
#                 machine stays warm (30 s idle, 30 minutes held); a later call cannot start another one meanwhile
#   server-wait   waits up to KB_SERVER_WAIT_S (default 540) for that run, printing its progress (results so far, lost,
#                 evaluations per minute) every 30 s, then copies its log and progress, and once it is done its JSON
#                 (bench_server.json) into $OUT; call it again while the run goes on
#   bench         identity + repeat + builds
#   all           tests + bench + baselines
#
# On a machine of several GPUs, one gpu_check per GPU can run at once (session 15, docs/benchmarks.md):
#   CUDA_VISIBLE_DEVICES=0 OUT=$OUT/g0 bash scripts/gpu_check.sh tests-b & CUDA_VISIBLE_DEVICES=1 OUT=$OUT/g1 bash ...
# Each evaluator pins its timed pair to the CPU of its GPU's host index (cpu_affinity.gpu_slots); still, time one
# benchmark at a time where the figure matters (they share the host's memory bandwidth and CPUs).
# Wheels for what the GPU image lacks (pydantic and its deps) go in .whl/ (see docs/benchmarks.md).
# KB_PHASE_TIMEOUT (seconds, default 600) bounds each phase. KB_TAR=NAME packs everything under $OUT
# into one archive at the end (the device returns a limited number of files).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# Every phase name is checked before anything runs: a misspelt one found after ten minutes of device time
# has cost the device time (session 15). The known names are the case labels below.
known=" $(sed -n 's/^    \([a-z0-9|-]*\)) .*/\1/p; s/^    \([a-z0-9|-]*\))$/\1/p' "scripts/gpu_check.sh" | tr '|\n' '  ') "
for phase in "$@"; do
  if [[ $known != *" $phase "* ]]; then
    echo "unknown phase $phase; nothing was run. Phases:$known" >&2
    exit 2
  fi
done
[ -z "${KB_CHECK_PHASES_ONLY:-}" ] || exit 0  # tests/test_gpu_check_phases.py
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  # Under a lock: one gpu_check per GPU may start at once (CUDA_VISIBLE_DEVICES=N OUT=... bash scripts/gpu_check.sh ...).
  { flock 9 && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kb-site \
      .whl/*.whl; } 9>/tmp/kb-site.lock && export PYTHONPATH=/tmp/kb-site:${PYTHONPATH:-}
fi
# The CuTe DSL / TileLang packages the dsl phase installed on this warm machine. A --target folder is not a site
# folder, so the .pth that puts the CUTLASS DSL's `cutlass` package on sys.path is not read: name that folder too.
dsl_site=/tmp/kb-dsl-site:/tmp/kb-dsl-site/nvidia_cutlass_dsl/dsl_packages
if [ -d /tmp/kb-dsl-site ]; then
  export PYTHONPATH=$dsl_site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
limit=${KB_PHASE_TIMEOUT:-600}
status=0

run() {  # run NAME CMD... : output to $OUT/NAME.log under the phase time limit, remember failures
  local name=$1; shift
  echo "=== $name: $*" | tee "$OUT/$name.log"
  local t0=$SECONDS
  timeout --signal=INT --kill-after=15 "${KB_TIMEOUT:-$limit}" "$@" >>"$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name exit $rc after $((SECONDS - t0)) s" | tee -a "$OUT/$name.log"
  tail -n 25 "$OUT/$name.log"
  [ "$rc" -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv | tee "$OUT/gpu.txt"
gpu=$(python3 -c "from kernelbench.hardware import gpu_label; import torch; print(gpu_label(torch.cuda.get_device_name(0)))" 2>/dev/null || echo GPU)

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(all)
for phase in "${phases[@]}"; do
  case $phase in
    all) set -- tests bench baselines; for p in "$@"; do KB_TAR='' bash "$0" "$p" || status=1; done ;;
    bench) for p in identity repeat builds; do KB_TAR='' bash "$0" "$p" || status=1; done ;;
    tests) run gpu-tests python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=15 tests ;;
    tests-a) run gpu-tests-a python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=10 \
      tests/test_adversarial_runtime.py tests/test_builtin_suite.py ;;
    tests-d) run gpu-tests-d python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=10 \
      tests/test_roofline.py tests/test_hardware.py tests/test_rate_measurement.py tests/test_leaderboard_evaluate.py \
      tests/test_profiling.py \
      tests/test_generation_prompts.py tests/test_generation_cli.py tests/test_modal_worker.py tests/test_server_gpu.py \
      tests/test_modal_app.py tests/test_modal_shipped_files.py tests/test_modal_hub.py ;;
    tests-quick) run tests-quick python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=10 \
      tests/test_timing_flags_gpu.py tests/test_reference_template.py tests/test_overlap.py \
      tests/test_compare_kernel_gpu.py ;;
    evaltests|tests-b) run evaltests python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=10 tests/test_evaluator_gpu.py \
      tests/test_sandbox_gpu.py tests/test_timing_flags_gpu.py tests/test_overlap.py tests/test_fingerprint_gpu.py \
      tests/test_reference_template.py tests/test_compare_kernel_gpu.py ;;
    soltests|tests-c) run soltests python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=10 tests/test_solutions_inprocess.py ;;
    solutions) run solutions python3 scripts/eval_solutions.py --out "$OUT/eval_solutions.json" ;;
    dsl)
      # The packages come in parts (one device call carries at most 64 MiB). scripts/pack_dsl_site.sh makes an xz
      # archive of the installed packages split over .dsl-wheels/a, b, ...: join and unpack it into /tmp/kb-dsl-site.
      # Or wheels: split files (NAME.whl.part-aa, -ab, ...) are joined into NAME.whl, then installed there.
      if compgen -G ".dsl-wheels/*/dslsite.tar.xz.part-*" >/dev/null; then
        # shellcheck disable=SC2016
        run dsl-unpack bash -c 'cat .dsl-wheels/*/dslsite.tar.xz.part-* > /tmp/kb-dslsite.tar.xz && mkdir -p /tmp/kb-dsl-site &&
          python3 -c "import tarfile; tarfile.open(\"/tmp/kb-dslsite.tar.xz\").extractall(\"/tmp/kb-dsl-site\")" &&
          rm -f /tmp/kb-dslsite.tar.xz'
        export PYTHONPATH=$dsl_site:${PYTHONPATH:-}
      elif compgen -G ".dsl-wheels/*.whl*" >/dev/null; then
        for first in .dsl-wheels/*.whl.part-aa; do
          [ -e "$first" ] || continue
          whl=${first%.part-aa}; cat "$whl".part-* > "$whl" && rm -f "$whl".part-*
        done
        run dsl-install python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade \
          --target /tmp/kb-dsl-site .dsl-wheels/*.whl
        export PYTHONPATH=$dsl_site:${PYTHONPATH:-}
      fi
      if ! python3 -c "import cutlass.cute, tilelang" >/dev/null 2>&1; then
        echo "dsl: nvidia-cutlass-dsl and/or tilelang are not importable here (carry their wheels in .dsl-wheels/, docs/benchmarks.md): their GPU tests skip" \
          | tee "$OUT/dsl-missing.txt"
      fi
      run dsl-versions bash -c "python3 -m pip list 2>/dev/null | grep -i -E 'cutlass|tilelang|tvm|z3|cuda-bindings' || true"
      KB_CORPUS_BACKENDS=cute,tilelang run dsl-tests python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=10 \
        tests/test_generation_prompts.py tests/test_solutions_inprocess.py tests/test_adversarial_runtime.py \
        tests/test_profiling.py -k "cute or tilelang"
      run dsl-solutions python3 scripts/eval_solutions.py --backend cute --backend tilelang \
        --out "$OUT/eval_solutions_dsl.json" ;;
    profile)
      for be in triton cuda cute tilelang; do
        for sol in kernelbench/solutions/"$be"/level1/8_ReLU.py kernelbench/solutions/"$be"/level1/1_Square_matmul.py; do
          [ -f "$sol" ] || continue
          p=$(basename "$sol" .py); pid=${p%%_*}
          run "profile-$be-$p" python3 -m kernelbench.cli.main profile --level 1 --problem-id "$pid" --kernel "$sol" \
            --backend "$be" --no-sandbox --json "$OUT/profile_${be}_${p}.json" --keep-csv "$OUT/ncu_raw_${be}_${p}.csv"
        done
      done
      run profile-sandbox python3 -m kernelbench.cli.main profile --level 1 --problem-id 8 --backend triton \
        --kernel kernelbench/solutions/triton/level1/8_ReLU.py --require-sandbox ;;
    adversarial) run adversarial python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=60 tests/test_adversarial_runtime.py ;;
    memory) run memory python3 scripts/bench_evaluator.py --level 1 --problem-id 26 --verbose --out "$OUT/memory.json" ;;
    identity) run identity python3 scripts/bench_evaluator.py --levels 1 2 3 --out "$OUT/bench_identity.json" ;;
    issue23) run issue23-tests python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=10 \
        tests/test_timing_flags_gpu.py tests/test_evaluator_gpu.py
      KB_TAR='' bash "$0" issue23-bench || status=1 ;;
    issue23-bench)
      # shellcheck disable=SC2086
      run issue23-bench python3 scripts/bench_evaluator.py --source directory --path "${KB_OFFICIAL:-kb_official/KernelBench}" \
        --levels ${KB_LEVELS:-1 2 3} --sandbox "${KB_SANDBOX:-auto}" \
        --out "$OUT/bench_issue23_L$(echo "${KB_LEVELS:-1 2 3}" | tr -d ' ').json" ;;
    official-sweep)
      # The 250 official problems on one GPU take longer than one device call: each call goes on from the file the
      # last one brought back (copied to $KB_SWEEP_RESUME, default runs/sweep/official.json, and carried).
      resume=${KB_SWEEP_RESUME:-runs/sweep/official.json}
      flag=(); [ -f "$resume" ] && flag=(--resume "$resume")
      # shellcheck disable=SC2086
      run official-sweep python3 scripts/bench_evaluator.py --source directory \
        --path "${KB_OFFICIAL:-kb_official/KernelBench}" --levels ${KB_LEVELS:-1 2 3} --sandbox "${KB_SANDBOX:-auto}" \
        ${KB_PROBLEM_IDS:+--problem-id $KB_PROBLEM_IDS} "${flag[@]}" --out "$OUT/official_sweep.json" ;;
    throughput)
      ids=$(seq -s ' ' 1 "${KB_THROUGHPUT_N:-40}")
      for mode in no-overlap overlap; do
        flag=""; [ "$mode" = no-overlap ] && flag="--no-overlap"
        # shellcheck disable=SC2086
        run "throughput-$mode" python3 scripts/bench_evaluator.py --source directory \
          --path "${KB_OFFICIAL:-kb_official/KernelBench}" --level "${KB_LEVELS:-2}" --problem-id $ids $flag \
          --sandbox "${KB_SANDBOX:-auto}" --out "$OUT/bench_throughput_${mode}_L${KB_LEVELS:-2}.json"
      done ;;
    fingerprint-ab)
      ids=${KB_PROBLEM_IDS:-$(seq -s ' ' 1 "${KB_THROUGHPUT_N:-40}")}
      for path in torch fused; do
        # shellcheck disable=SC2086
        KB_FINGERPRINT=$path run "fingerprint-ab-$path" python3 scripts/bench_evaluator.py --source directory \
          --path "${KB_OFFICIAL:-kb_official/KernelBench}" --level "${KB_LEVELS:-2}" --problem-id $ids \
          --sandbox "${KB_SANDBOX:-auto}" --out "$OUT/bench_fingerprint_${path}_L${KB_LEVELS:-2}.json"
      done ;;
    timing-profile) run timing-profile python3 scripts/profile_timing_stage.py --source directory \
        --path "${KB_OFFICIAL:-kb_official/KernelBench}" --level "${KB_LEVELS:-2}" --problem-id $(seq -s ' ' 1 10) \
        --fingerprinter ${KB_FINGERPRINTERS:-torch current} --json "$OUT/timing_stage_L${KB_LEVELS:-2}.json" ;;
    fingerprint) run worker-init python3 scripts/probe_worker_init.py --fingerprint "${KB_FINGERPRINT:-fused}" --wait 90
      run fingerprint-bench python3 scripts/bench_fingerprint.py --elements 268435456 33554432 8388608 1048576 10000 --json "$OUT/bench_fingerprint.json"
      run fingerprint-tests python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_fingerprint_gpu.py ;;
    fingerprint-f32)
      run fingerprint-ops python3 scripts/probe_fingerprint_ops.py --elements 1610612736 268435456 16777216 \
        --repeats 5 --json "$OUT/probe_fingerprint_ops.json"
      run fingerprint-bench python3 scripts/bench_fingerprint.py --elements 1610612736 268435456 16777216 1048576 10000 \
        --repeats 10 --json "$OUT/bench_fingerprint.json"
      run fingerprint-tests python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_fingerprint_gpu.py ;;
    compare) run compare-bench python3 scripts/bench_compare.py --json "$OUT/bench_compare.json"
      run compare-tests python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_compare_kernel_gpu.py ;;
    init-pieces) run init-pieces python3 scripts/probe_init_pieces.py --json "$OUT/probe_init_pieces.json" ;;
    init-probe) run init-probe python3 scripts/probe_init_interference.py --json "$OUT/probe_init_interference.json"
      for role in candidate reference; do
        run "worker-init-$role" python3 scripts/probe_worker_init.py --role "$role" --fingerprint torch --wait 60
      done ;;
    repeat) run repeat python3 scripts/bench_evaluator.py --level 3 --problem-id 3 --repeat 5 --out "$OUT/bench_repeat.json" ;;
    probe) run probe python3 scripts/probe_placement.py --keep --out "$OUT/probe_placement.json"
      run probe-processes python3 scripts/probe_placement.py --processes 8 --alloc-conf expandable_segments:True \
        --out "$OUT/probe_processes.json"
      run probe-concurrent python3 scripts/probe_placement.py --processes 8 --concurrent --rounds 2 \
        --alloc-conf expandable_segments:True --out "$OUT/probe_concurrent.json" ;;
    recipe) run probe-recipes python3 scripts/probe_placement.py --recipes --rounds 6 --out "$OUT/probe_recipes.json"
      run probe-offsets python3 scripts/probe_placement.py --offsets --out "$OUT/probe_offsets.json" ;;
    host) run probe-host-lstm python3 scripts/probe_host.py --level 3 --problem-id 5 --out "$OUT/probe_host_lstm.json"
      run probe-host-gru python3 scripts/probe_host.py --level 3 --problem-id 6 --out "$OUT/probe_host_gru.json"
      run identity-rnn python3 scripts/bench_evaluator.py --level 3 --problem-id 5 6 --repeat 3 \
        --out "$OUT/bench_identity_rnn.json" ;;
    sandbox-gpu) run sandbox-probe python3 scripts/probe_sandbox_gpu.py --json "$OUT/probe_sandbox_gpu.json"
      run sandbox-gpu python3 -m pytest -q -p no:cacheprovider -rA -s tests/test_sandbox_gpu.py ;;
    sandbox) run sandbox-probe python3 scripts/probe_sandbox_gpu.py --json "$OUT/probe_sandbox_gpu.json"
      run sandbox python3 -m pytest -q -p no:cacheprovider -rA --durations=10 -m "gpu or not gpu" \
      tests/test_sandbox_gpu.py tests/test_sandbox_exploits.py tests/test_evaluator_gpu.py ;;
    overhead) run overhead-sandbox python3 scripts/bench_evaluator.py --levels 1 2 3 --sandbox require \
        --out "$OUT/bench_identity_sandbox.json"
      run overhead-process python3 scripts/bench_evaluator.py --levels 1 2 3 --sandbox off \
        --out "$OUT/bench_identity_process.json" ;;
    transport) run transport python3 scripts/bench_host_copies.py --gib 0.5 2 --trials 5 --json "$OUT/bench_host_copies.json"
      run sandbox-gpu python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_sandbox_gpu.py ;;
    demo) run demo python3 scripts/bench_demo.py --repeat 3 --json "$OUT/demo_gpu.json" ;;
    demo-board)
      # The worked solutions are this repository's own kernels: process isolation (the sandbox has its phase).
      board="$OUT/demo-board"
      mkdir -p "$board/submissions" "$board/data/evaluations"
      cp examples/demo-board/submissions/*.json "$board/submissions/"
      for sub in "$board"/submissions/*.json; do
        run "demo-board-$(basename "$sub" .json)" python3 -m kernelbench.cli.main leaderboard evaluate "$sub" \
          --runner local --source builtin --no-sandbox --runs-dir runs/demo-board \
          --results-dir "$board/data/evaluations"
      done
      run demo-board-aggregate python3 -m kernelbench.cli.main leaderboard aggregate --source builtin \
        --submissions-dir "$board/submissions" --evaluations-dir "$board/data/evaluations" --out "$board/data" \
        --exclusions leaderboard/exclusions.json
      run demo-board-build python3 -m kernelbench.cli.main leaderboard build --data "$board/data" --out "$board/site" ;;
    server) run server-tests python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_server_gpu.py
            run server-load python3 scripts/bench_server.py --requests "${KB_SERVER_REQUESTS:-96}" --clients 16 --level 2 \
              --out "$OUT/bench_server.json" ;;
    server-start)
      load=${KB_LOAD_DIR:-/tmp/kb-load}
      if [ -f "$load/pid" ] && [ ! -f "$load/rc" ] && kill -0 "$(cat "$load/pid")" 2>/dev/null; then
        echo "server-start: a load test is still running (pid $(cat "$load/pid"), $load): run server-wait" \
          | tee "$OUT/server-start.log" >&2
        status=1
      else
        # A snapshot of the code and of the carried wheels: the next device call copies the working tree again and
        # reinstalls .whl/ into /tmp/kb-site, and the run's new worker processes must not import files mid-copy.
        rm -rf "$load" && mkdir -p "$load/src"
        cp -r kernelbench scripts pyproject.toml "$load/src/"
        [ -d /tmp/kb-site ] && cp -r /tmp/kb-site "$load/site"
        extra=()
        [ -z "${KB_AFFINITY_WINDOW:-}" ] || extra=(--server-arg=--affinity-window "--server-arg=$KB_AFFINITY_WINDOW")
        # shellcheck disable=SC2016,SC2086
        PYTHONPATH=$load/src:$load/site:$PYTHONPATH setsid nohup bash -c 'echo $$ > "$0/pid"; cd "$0/src" || exit 2
          timeout --signal=INT --kill-after=60 "$1" python3 scripts/bench_server.py --progress "$0/progress.json" \
            --out "$0/bench_server.json" "${@:2}"
          echo $? > "$0/rc"' "$load" "${KB_SERVER_LIMIT_S:-1800}" --requests "${KB_SERVER_REQUESTS:-500}" \
          --clients "${KB_SERVER_CLIENTS:-16}" --level 2 --group-size "${KB_SERVER_GROUP:-1}" "${extra[@]}" \
          ${KB_SERVER_EXTRA:-} \
          >"$load/bench_server.log" 2>&1 </dev/null &
        sleep 5  # a run that cannot even start says so now, not one call later
        { echo "server-start: scripts/bench_server.py running in the background (pid $(cat "$load/pid" 2>/dev/null)),"
          echo "  ${KB_SERVER_REQUESTS:-500} requests, ${KB_SERVER_CLIENTS:-16} clients, level 2, group size" \
            "${KB_SERVER_GROUP:-1}, window ${KB_AFFINITY_WINDOW:-default} ${KB_SERVER_EXTRA:-}"
          echo "  log, progress and JSON under $load; collect with the server-wait phase"; } | tee "$OUT/server-start.log"
        if [ -f "$load/rc" ]; then
          echo "server-start: the run already ended with status $(cat "$load/rc"):" | tee -a "$OUT/server-start.log"
          tail -n 25 "$load/bench_server.log" | tee -a "$OUT/server-start.log"
          status=1
        fi
      fi ;;
    server-wait)
      load=${KB_LOAD_DIR:-/tmp/kb-load}
      if [ ! -f "$load/pid" ]; then
        echo "server-wait: no load test on this machine ($load/pid is missing): run server-start first (a machine that" \
          "went back loses the run)" | tee "$OUT/server-wait.log" >&2
        status=1
      else
        progress_line() {  # one line from the run's progress file
          python3 -c 'import json, sys
try:
    p = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("no progress file yet"); raise SystemExit
print("%s: %s of %s results, %s lost, %s s, %s evaluations/min (group size %s)" % (p["state"], p["results"],
      p["requests"], p["lost"], p["elapsed_s"], p["evaluations_per_minute"], p["group_size"]))' "$load/progress.json"
        }
        t0=$SECONDS; shown=-30
        while [ ! -f "$load/rc" ] && [ $((SECONDS - t0)) -lt "${KB_SERVER_WAIT_S:-540}" ]; do
          if [ $((SECONDS - shown)) -ge 30 ]; then
            echo "server-wait $((SECONDS - t0)) s: $(progress_line)" | tee -a "$OUT/server-wait.log"; shown=$SECONDS
          fi
          kill -0 "$(cat "$load/pid")" 2>/dev/null || break  # gone without a status: killed
          sleep 5
        done
        echo "server-wait $((SECONDS - t0)) s: $(progress_line)" | tee -a "$OUT/server-wait.log"
        cp "$load/bench_server.log" "$load/progress.json" "$OUT/" 2>/dev/null
        if [ -f "$load/rc" ]; then
          cp "$load/bench_server.json" "$OUT/" 2>/dev/null
          echo "server-wait: the run ended with status $(cat "$load/rc"); bench_server.json in \$OUT" \
            | tee -a "$OUT/server-wait.log"
          tail -n 3 "$load/bench_server.log"
          [ "$(cat "$load/rc")" = 0 ] || status=1
        elif kill -0 "$(cat "$load/pid")" 2>/dev/null; then
          echo "server-wait: still running; call server-wait again while the machine is warm" | tee -a "$OUT/server-wait.log"
        else
          echo "server-wait: the run was killed before it finished (no exit status); its log is in \$OUT" \
            | tee -a "$OUT/server-wait.log"
          status=1
        fi
      fi ;;
    official-baselines)
      mkdir -p baselines/kernelbench
      # shellcheck disable=SC2086
      run official-baselines python3 scripts/bench_baselines.py --source directory \
        --path "${KB_OFFICIAL:-kb_official/KernelBench}" --levels ${KB_LEVELS:-1 2 3} \
        --out "baselines/kernelbench/${KB_BASELINE_OUT:-$gpu}.json" --json "$OUT/bench_official_baselines.json" \
        --modes ${KB_BASELINE_MODES:-eager} --deadline "${KB_BASELINE_DEADLINE:-480}" --compile-timeout 240 \
        ${KB_BASELINE_SPARES:+--spares "$KB_BASELINE_SPARES"} ${KB_NO_SOL:+--no-sol} ${KB_NO_REPEAT:+--no-repeat} \
        ${KB_PROBLEM_IDS:+--problem-id "$KB_PROBLEM_IDS"} ${KB_COMPILE_JOBS:+--compile-jobs "$KB_COMPILE_JOBS"}
      cp baselines/kernelbench/"${KB_BASELINE_OUT:-$gpu}"*.json "$OUT/" 2>/dev/null ;;
    basetests) run basetests python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=10 tests/test_baselines_gpu.py ;;
    rates) run rates python3 scripts/measure_rates.py
      cp kernelbench/data/measured_rates.json "$OUT/" 2>/dev/null ;;
    builds) run builds python3 scripts/bench_cuda_builds.py --out "$OUT/bench_builds.json" ;;
    baselines)
      # shellcheck disable=SC2086
      run baselines python3 scripts/bench_baselines.py --out "baselines/$gpu.json" --json "$OUT/bench_baselines.json" \
        --modes ${KB_BASELINE_MODES:-all} --deadline "${KB_BASELINE_DEADLINE:-480}" --compile-timeout 240 \
        ${KB_BASELINE_RESTART:+--restart} ${KB_BASELINE_SPARES:+--spares "$KB_BASELINE_SPARES"}
      du -sh /tmp/torchinductor_* 2>/dev/null | tee -a "$OUT/baselines.log"  # what a compile warm-up leaves
      cp "baselines/$gpu.json" "$OUT/" 2>/dev/null
      cp "baselines/$gpu.eager-repeat.json" "$OUT/" 2>/dev/null ;;
    *) echo "unknown phase $phase (see the comment at the top of $0)" >&2; status=2 ;;
  esac
done
if [ -n "${KB_TAR:-}" ]; then  # one archive of everything: the device returns a limited number of files
  tar czf "/tmp/$KB_TAR" -C "$OUT" . && find "$OUT" -type f -delete && mv "/tmp/$KB_TAR" "$OUT/"
fi
exit $status
