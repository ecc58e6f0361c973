"""An RL loop calling ``kernelbench serve``: sample a group of candidates per step, get verdicts, turn them into rewards.

The policy here is a stand-in (it rewrites the reference's Model as ModelNew, sometimes with a bug), so the
example runs anywhere; put your model's sampling in ``policy``. What carries over to a real trainer:

* the problem's reference source comes from the server (``client.problem``), so prompts and verdicts
  use the same problem;
* a whole group is sent as one batch and the server spreads it over its GPUs while the trainer waits;
* the reward reads the typed ``KernelResult``: correctness gates it, the in-session speedup shapes it.

Start a server, then run the loop (on a machine without a GPU, at the problems' reduced CPU size):

    kernelbench serve --port 8000 &
    python examples/rl_loop.py --url http://127.0.0.1:8000 --level 1 --problem-id 8 --steps 3 --reduced-size
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

from kernelbench.results import KernelResult, Stage
from kernelbench.server.client import EvalClient, make_request


def policy(reference_source: str, rng: random.Random) -> str:
    """Stand-in for sampling from a model: a correct torch rewrite, or (one time in three) a wrong one."""
    candidate = reference_source.replace("class Model(", "class ModelNew(").replace("super(Model, self)",
                                                                                     "super(ModelNew, self)")
    if rng.random() < 1 / 3:
        candidate += "\n_forward = ModelNew.forward\nModelNew.forward = lambda self, *a: _forward(self, *a) * 1.5\n"
    return candidate


def reward(result: KernelResult) -> float:
    """-1 for code that does not load or compile, 0 for wrong answers, then log-speedup (0.1 if not timed)."""
    if not result.correct:
        return -1.0 if result.error is not None and result.error.stage in (Stage.LOAD, Stage.COMPILE) else 0.0
    if result.speedup is None:  # correct, but not timed (CPU, or timing off)
        return 0.1
    return max(0.1, 1.0 + math.log(result.speedup))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--level", type=int, default=1)
    p.add_argument("--problem-id", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--group", type=int, default=4, help="candidates per step (one batch)")
    p.add_argument("--backend", default="torch", help="what the policy writes: torch, triton or cuda")
    p.add_argument("--reduced-size", action="store_true", help="evaluate at the problem's CPU_SIZE (no GPU)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    with EvalClient(args.url) as client:
        problem = client.problem(args.level, args.problem_id)
        print(f"problem {problem.name} (level {problem.level}) from {client.health().problem_set}")
        for step in range(args.steps):
            sources = [policy(problem.code, rng) for _ in range(args.group)]
            requests = [make_request(src, level=args.level, problem_id=args.problem_id, backend=args.backend,
                                     reduced_size=args.reduced_size, sample_id=step * args.group + i)
                        for i, src in enumerate(sources)]
            results = client.evaluate_batch(requests)
            rewards = [reward(r) for r in results]
            # Here a trainer would compute advantages (reward - group mean) and update the policy.
            print(f"step {step}: mean reward {statistics.fmean(rewards):.3f}; "
                  + ", ".join(f"{r.verdict()}->{w:.2f}" for r, w in zip(results, rewards)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
