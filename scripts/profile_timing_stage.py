"""Where a timing stage's wall time goes between forwards: one worker's Time commands, piece by piece.

Session 11's recorded sweep spent about 1 s per problem in the timing stage beyond the forwards
themselves (docs/benchmarks.md, "Evaluator throughput"). This script runs the reference worker's own
code in this process (trusted: the problem's Model) through the commands the evaluator sends while
timing: a warm-up, then ROUNDS blocks of BLOCK calls with fingerprints, and times each piece of a
call on the host: making the inputs, the L2 flush, seeding, the launch cushion, enqueuing the forward,
waiting for the GPU, fingerprints and tolerance bounds; plus the warm-up's garbage collection and
cache release, and (GPU) what one L2 flush costs the GPU. Host times of GPU work are enqueue times;
the wait for the GPU shows up under "sync".

    python scripts/profile_timing_stage.py --source directory --path kb_official/KernelBench --level 2 \\
        --problem-id 1 2 3 --json timing_stage.json
    python scripts/profile_timing_stage.py --device cpu --level 1 --problem-id 8 --reduced-size   # plumbing

Run on the GPU machine; on a CPU there is no flush, cushion or event (a check that it runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelbench.evaluation import protocol  # noqa: E402
from kernelbench.evaluation.seeds import INIT_SEED  # noqa: E402
from kernelbench.evaluation.settings import EvalSettings  # noqa: E402
from kernelbench.evaluation.timing import launch_cushion_us  # noqa: E402
from kernelbench.evaluation.worker import timing as worker_timing  # noqa: E402
from kernelbench.evaluation.worker.process import Worker  # noqa: E402
from kernelbench.problems import load_problems  # noqa: E402
from kernelbench.problems.model import at_reduced_sizes  # noqa: E402

#: Pieces of one timed call, in the order a call runs them ("fingerprint": the output's sums and the tolerance
#: bounds; before session 16 they were two pieces, "fingerprint" 4.1 ms and "bounds" 3.5 ms on official level 2).
PIECES = ("inputs", "flush", "seed", "cushion", "forward", "sync", "fingerprint")


class PreviousFingerprinter:
    """The fingerprinter as it was until session 16, kept here only to measure the new one against it.

    Per 16M-element chunk it copied the output into a float64 buffer and read a plain sum, a dot product with a
    float64 weight vector, and (bounds) a second copy's absolute sum back to the host one by one: 72 bytes moved
    per float32 element and three read-backs per chunk, against 56 bytes and one read-back per call now. (Its
    weights here are the current pattern: what is measured is the work, the same with either pattern.)
    """

    def __init__(self, chunk: int = 1 << 24):
        self.chunk = chunk
        self._buf = self._w = None

    def _buffers(self, device):
        import torch

        from kernelbench.evaluation.compare import _weights

        if self._buf is None or self._buf.device != device:
            self._buf = torch.empty(self.chunk, dtype=torch.float64, device=device)
            self._w = _weights(0, self.chunk, device)
        return self._buf, self._w

    def prepare(self, tensors) -> None:
        """It made its buffers at the first call fingerprinted, not in the warm-up."""

    def measure(self, tensors, tolerance=None, key=0):
        """``key`` (the call's weights since session 17) is taken and ignored: the same weights every call."""
        import torch

        sums, bounds = [], []
        for t in tensors:
            f = t.reshape(-1)
            if f.is_complex():
                f = torch.view_as_real(f).reshape(-1)
            s0 = s1 = mag = 0.0
            if f.numel():
                buf, w = self._buffers(f.device)
                for s in range(0, f.numel(), self.chunk):
                    part = f[s:s + self.chunk]
                    b = buf[:part.numel()]
                    b.copy_(part)
                    s0 += float(b.sum())
                    s1 += float(torch.dot(b, w[:part.numel()]))
            sums.extend([s0, s1])
            if tolerance is None:
                continue
            if not f.is_floating_point():
                bounds.extend([0.5, 0.5])
                continue
            if f.numel():
                buf, _ = self._buffers(f.device)
                for s in range(0, f.numel(), self.chunk):
                    part = f[s:s + self.chunk]
                    x = buf[:part.numel()]
                    x.copy_(part)
                    x.abs_()
                    mag += float(x.sum())
            b = tolerance[0] * f.numel() + tolerance[1] * mag + 1e-9 * mag
            bounds.extend([b, b])
        return sums, bounds


class Clock:
    """Accumulated host seconds per piece (wrapping a callable adds about a microsecond)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t0
                self.counts[name] += 1
        return timed


class _SeedingInputs:
    """The worker's ``inputs`` module with ``seed_everything`` timed (the rest passed through)."""

    def __init__(self, module, clock: Clock):
        self._module = module
        self.seed_everything = clock.wrap("seed", module.seed_everything)

    def __getattr__(self, name):
        return getattr(self._module, name)


def instrument(w: Worker, clock: Clock) -> None:
    # The wrappers below are instance attributes shadowing the worker's methods, which the timed calls refuse as a
    # candidate's tampering (worker_timing.worker_changes); this trusted profiler, in its own process, turns it off.
    worker_timing.worker_changes = lambda _w: []
    w._make_inputs = clock.wrap("inputs", w._make_inputs)
    w._flush = clock.wrap("flush", w._flush)
    w._cushion = clock.wrap("cushion", w._cushion)
    w._sync = clock.wrap("sync", w._sync)
    w._event_sync = clock.wrap("sync", w._event_sync)
    w.inputs = _SeedingInputs(w.inputs, clock)
    w.fingerprinter.measure = clock.wrap("fingerprint", w.fingerprinter.measure)
    w._collect_cycles = clock.wrap("warmup_gc", w._collect_cycles)
    w._release_cached_memory = clock.wrap("warmup_release", w._release_cached_memory)
    model = w.model
    w.model = clock.wrap("forward", model)


def flush_gpu_ms(w: Worker, repeats: int = 20) -> float | None:
    """GPU milliseconds of one L2 flush (event-timed), or None on the CPU."""
    if not w.is_cuda:
        return None
    torch = w.torch
    w._flush()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(repeats):
        w.l2_flush.zero_()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / repeats


def profile_problem(problem, device: str, rounds: int, block: int, settings: EvalSettings,
                    fingerprinter: str = "current") -> dict:
    w = Worker("reference", device)
    w.cmd_init(protocol.Init(), [])
    if fingerprinter == "previous":
        w.fingerprinter = PreviousFingerprinter()
    elif fingerprinter == "torch":  # today's weights through torch operators, not the one-pass kernel
        w.fingerprinter.fused = None
    elif w.is_cuda and w.fingerprinter.fused is None and not w.fingerprinter.enable_fused(w.device, force=True):
        print("warning: the one-pass fingerprint kernel did not start; 'current' is the torch path", flush=True)
    tol = settings.tolerance
    w.cmd_setup(protocol.Setup(code=problem.code, precision=settings.precision, atol=tol.atol, rtol=tol.rtol,
                               init_seed=INIT_SEED, probe_seed=None, ieee_fp32=settings.ieee_fp32,
                               compile_mode=None), [])
    clock = Clock()
    instrument(w, clock)
    cushion = settings.launch_cushion_us
    t0 = time.perf_counter()
    warm, _ = w.cmd_time(protocol.Time(seeds=[1, 2, 3, 4], fwd_seeds=[5, 6, 7, 8], warmup=True, fingerprint=True,
                                       cushion_us=cushion), [])
    warm_wall = time.perf_counter() - t0
    event_ms, block_walls, first = [], [], None
    before = dict(clock.seconds)
    for r in range(rounds):
        seeds = [100 + r * block + i for i in range(block)]
        t0 = time.perf_counter()
        reply, _ = w.cmd_time(protocol.Time(seeds=seeds, fwd_seeds=[s + 7 for s in seeds], warmup=False,
                                            fingerprint=True, cushion_us=cushion), [])
        block_walls.append(time.perf_counter() - t0)
        event_ms.extend(reply.times_ms)
        if r == 0:
            # A worker's first timed block pays one-time costs (the fingerprint buffers); every candidate
            # worker is new, so they are part of every timing stage, but shown apart from the steady state.
            first = {"wall_s": block_walls[0], "host_s": {k: clock.seconds[k] - before.get(k, 0.0) for k in PIECES}}
            before = dict(clock.seconds)
    later_calls = (rounds - 1) * block
    timed = {k: (clock.seconds[k] - before.get(k, 0.0)) / max(1, later_calls) * 1000 for k in PIECES}
    wall_ms = sum(block_walls[1:]) / max(1, later_calls) * 1000
    return {
        "problem": problem.key, "name": problem.name, "calls": rounds * block, "fingerprinter": fingerprinter,
        "forward_event_ms": statistics.median(event_ms),
        "first_block": first,
        "wall_per_call_ms": wall_ms,
        "host_ms_per_call": timed,
        "unaccounted_ms_per_call": wall_ms - sum(timed.values()),
        "warmup": {"calls": warm.calls, "wall_s": warm_wall, "gc_s": clock.seconds["warmup_gc"],
                   "release_s": clock.seconds["warmup_release"]},
        "flush_gpu_ms": flush_gpu_ms(w),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", default="builtin")
    p.add_argument("--path", default=None)
    p.add_argument("--level", type=int, default=2)
    p.add_argument("--problem-id", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--rounds", type=int, default=8, help="timed blocks, at least 2 (default 8, as most level-2 "
                   "timings took): the first is shown apart")
    p.add_argument("--block", type=int, default=3, help="calls per block (default 3)")
    p.add_argument("--reduced-size", action="store_true", help="each problem at its declared CPU size")
    p.add_argument("--fingerprinter", choices=["current", "torch", "previous", "both"], nargs="+",
                   default=["current"],
                   help="the library's fingerprinter with the one-pass Triton kernel on (on a GPU), today's weights through "
                        "torch operators (torch), the one before session 16 (previous); several: each problem "
                        "profiled once with each, in turn; both = previous current")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the figures as JSON")
    args = p.parse_args()
    if args.rounds < 2 or args.block < 1:
        p.error("--rounds must be at least 2 and --block at least 1")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            p.error(f"--device {args.device}: no GPU here (--device cpu checks the plumbing)")
    problems = load_problems(args.source, args.path, levels=[args.level]).select(levels=[args.level],
                                                                               ids=args.problem_id)
    if args.reduced_size:
        problems = at_reduced_sizes(problems)
        if not problems:
            p.error("--reduced-size: none of the selected problems declares a CPU_SIZE")
    settings = EvalSettings(backend="torch", launch_cushion_us=launch_cushion_us() if args.device != "cpu" else 0)
    kinds: list[str] = []
    for kind in args.fingerprinter:
        for k in (["previous", "current"] if kind == "both" else [kind]):
            if k not in kinds:
                kinds.append(k)
    rows = []
    for problem in problems:
        for kind in kinds:
            row = profile_problem(problem, args.device, args.rounds, args.block, settings, kind)
            rows.append(row)
            h = row["host_ms_per_call"]
            fb = row["first_block"]
            print(f"{row['problem']} {row['name'][:32]:32} [{kind}] forward {row['forward_event_ms']:8.3f} ms (event); "
                  f"first block {fb['wall_s']:.3f} s (fingerprint {fb['host_s']['fingerprint']:.3f} s); then "
                  f"wall {row['wall_per_call_ms']:8.3f} ms per timed call; host ms: "
                  + " ".join(f"{k} {h[k]:.3f}" for k in PIECES)
                  + f" other {row['unaccounted_ms_per_call']:.3f}; warm-up {row['warmup']['calls']} calls "
                  f"{row['warmup']['wall_s']:.3f} s (gc {row['warmup']['gc_s']:.3f} s, release "
                  f"{row['warmup']['release_s']:.3f} s)"
                  + (f"; one L2 flush {row['flush_gpu_ms']:.3f} ms of GPU" if row["flush_gpu_ms"] is not None else ""),
                  flush=True)
    for kind in kinds:
        mine = [r for r in rows if r["fingerprinter"] == kind]
        if not mine:
            continue
        n = len(mine)
        mean = {k: sum(r["host_ms_per_call"][k] for r in mine) / n for k in PIECES}
        print(f"\n[{kind} fingerprinter] mean over {n} problem(s), host ms per timed call after the first block: "
              + ", ".join(f"{k} {v:.3f}" for k, v in mean.items())
              + f"; wall {sum(r['wall_per_call_ms'] for r in mine) / n:.3f}; forward (event) "
              f"{sum(r['forward_event_ms'] for r in mine) / n:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
