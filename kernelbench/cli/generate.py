"""``kernelbench generate``: ask a model for kernels for one level, into a run directory.

Also home of the generation options that ``run`` and ``single`` share, so they are spelled the same.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kernelbench.cli.common import (
    add_source_args,
    level_type,
    non_negative_float,
    non_negative_int,
    positive_int,
    problem_ids,
)

if TYPE_CHECKING:
    from kernelbench.generation.client import GenerationConfig, LLMClient
    from kernelbench.generation.pipeline import GenerationSummary, PromptOptions, SpendTracker
    from kernelbench.problems.identity import ProblemSetIdentity
    from kernelbench.problems.model import ProblemSet
    from kernelbench.runs import RunDirectory, RunInfo

log = logging.getLogger(__name__)

DEFAULT_RUNS_DIR = "runs"


def add_model_args(p: argparse.ArgumentParser, model_required: bool = True) -> None:
    from kernelbench.generation.client import REASONING_EFFORTS

    g = p.add_argument_group("model")
    g.add_argument("--model", required=model_required, default=None,
                   help="litellm model string: openai/gpt-5, anthropic/claude-sonnet-4-5, deepseek/deepseek-chat, "
                        "gemini/gemini-2.5-pro, together_ai/..., or openai/<served-name> with --api-base")
    g.add_argument("--api-base", default=None,
                   help="OpenAI-compatible server (sglang, vLLM), e.g. http://localhost:30000/v1")
    g.add_argument("--temperature", type=non_negative_float, default=0.0, help="sampling temperature (default 0)")
    g.add_argument("--max-tokens", type=positive_int, default=None, help="reply token limit (default: provider's)")
    g.add_argument("--reasoning-effort", choices=REASONING_EFFORTS, default=None,
                   help="for reasoning models (dropped where unsupported)")
    g.add_argument("--samples", type=positive_int, default=1, help="samples per problem (pass@k); default 1")
    g.add_argument("--concurrency", type=positive_int, default=4, help="requests in flight at once (default 4)")
    g.add_argument("--request-timeout", type=non_negative_float, default=600.0,
                   help="seconds before one request is abandoned (default 600)")
    g.add_argument("--retries", type=non_negative_int, default=5,
                   help="retries on rate limits, 5xx, timeouts and dropped connections (default 5)")
    g.add_argument("--max-cost", type=non_negative_float, default=None,
                   help="stop sending requests once the run has spent this many USD")
    g.add_argument("--price-in", type=non_negative_float, default=None,
                   help="USD per million prompt tokens, for models litellm has no price for")
    g.add_argument("--price-out", type=non_negative_float, default=None,
                   help="USD per million completion tokens, for models litellm has no price for")
    g.add_argument("--env-file", default=".env", help="file of KEY=VALUE lines with API keys (default .env)")
    g.add_argument("--api-key-env", default=None,
                   help="name of the variable holding the key (default: the provider's, e.g. OPENAI_API_KEY)")


def add_run_dir_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run directory")
    g.add_argument("--run-dir", default=None, help="run directory (default: <runs-dir>/<run-name>)")
    g.add_argument("--run-name", default=None, help="run name (default: <model>_level<L>_<backend>)")
    g.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR, help="parent folder of run directories (default runs)")


def add_selection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", type=level_type, required=True, help="level to generate for (one level per run)")
    p.add_argument("--problem-ids", default=None, help="only these problem ids, e.g. 1,3,5-8 (default: all)")


def use_offline_price_map() -> None:
    """litellm reads this once, at import: without it, importing litellm goes to the network."""
    from kernelbench.generation.client import OFFLINE_PRICE_MAP_VAR

    os.environ.setdefault(OFFLINE_PRICE_MAP_VAR, "True")


def prompt_gpu(value: str | None) -> str | None:
    """``--gpu`` for prompts: a name the hardware table knows, or 'none' to leave the GPU out."""
    if value is None or value.lower() in ("none", ""):
        return None
    from kernelbench.hardware import get_gpu_spec

    return get_gpu_spec(value).name


def generation_config_from_args(args: argparse.Namespace) -> GenerationConfig:
    from kernelbench.generation.client import GenerationConfig

    return GenerationConfig(
        model=args.model, api_base=args.api_base, temperature=args.temperature, max_tokens=args.max_tokens,
        reasoning_effort=args.reasoning_effort, timeout_s=args.request_timeout, max_retries=args.retries,
        input_cost_per_mtok=args.price_in, output_cost_per_mtok=args.price_out,
    )


def make_client(args: argparse.Namespace) -> LLMClient:
    from kernelbench.generation.client import LLMClient
    from kernelbench.generation.env import resolve_api_key

    use_offline_price_map()
    config = generation_config_from_args(args)
    key = resolve_api_key(config.model, config.api_base, args.api_key_env, args.env_file)
    log.info("model %s: %s", config.model, key)  # names the variable, never the value
    return LLMClient(config, key.value)


def default_run_name(model: str, level: int, backend: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', model).strip('_')}_level{level}_{backend}"


def resolve_run_dir(args: argparse.Namespace, backend: str) -> Path:
    if args.run_dir:
        return Path(args.run_dir)
    name = args.run_name or default_run_name(args.model, args.level, backend)
    if "/" in name or name in (".", ".."):
        from kernelbench.errors import KernelBenchError

        raise KernelBenchError(f"--run-name {name!r} must be a plain name; use --run-dir for a path")
    return Path(args.runs_dir) / name


def select_problems(args: argparse.Namespace) -> ProblemSet:
    from kernelbench.problems import load_problems

    problems = load_problems(args.source, args.path, levels=[args.level]).select(levels=[args.level])
    ids = problem_ids(args.problem_ids, "--problem-ids")
    return problems.select(ids=ids) if ids else problems


def check_resume(rd: RunDirectory, config: GenerationConfig, backend: str, precision: str) -> None:
    """A run holds one model, backend and precision; resuming with others would mix them."""
    from kernelbench.errors import RunDirectoryError

    info = rd.info()
    for key, old, value in (("model", info.model, config.model), ("backend", info.backend, backend),
                            ("precision", info.precision, precision)):
        if old is not None and old != value:
            raise RunDirectoryError(
                f"run {rd.path} was generated with {key} {old}, not {value}; use another --run-name or --run-dir")


def merged_problem_set(rd: RunDirectory, info: RunInfo, problems: ProblemSet) -> ProblemSetIdentity:
    """The run's problem set with these problems' hashes added; a run never mixes two sets."""
    from kernelbench.errors import RunDirectoryError
    from kernelbench.problems.identity import (
        ProblemSetIdentity,
        ProblemSetMismatchError,
        check_same_set,
        identify,
    )

    new = identify(problems)
    old = info.problem_set
    if old is not None:
        try:
            check_same_set(new, old, f"run {rd.path}")
        except ProblemSetMismatchError as e:
            raise RunDirectoryError(f"{e}; use another --run-name or --run-dir") from None
        new = ProblemSetIdentity(new.name, new.revision, {**old.hashes, **new.hashes})
    return new


def record_run_info(rd: RunDirectory, args: argparse.Namespace, config: GenerationConfig, options: PromptOptions,
                    problems: ProblemSet, samples: int, turns: int = 1) -> None:
    from datetime import datetime, timezone

    from kernelbench import __version__

    info = rd.info()
    ids = sorted(set(info.problem_ids or []) | {p.problem_id for p in problems})
    rd.write_info(
        problem_set=merged_problem_set(rd, info, problems),
        model=config.model, api_base=config.api_base, backend=options.backend, precision=options.precision,
        prompt_gpu=options.gpu, tolerance_mode=options.tolerance_mode, source=args.source,
        source_path=str(args.path) if args.path else None, level=args.level, problem_ids=ids,
        samples=max(samples, info.samples or 0), turns=turns, temperature=config.temperature,
        max_tokens=config.max_tokens, reasoning_effort=config.reasoning_effort,
        created_at=info.created_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        kernelbench_version=__version__, feedback=getattr(args, "feedback", None) if turns > 1 else None,
    )


def _money(v: float | None) -> str:
    return "n/a" if v is None else f"${v:.4f}"


def _cost_text(summary: GenerationSummary, tracker: SpendTracker) -> str:
    priced = [r for r in summary.records if r.usage is not None and r.usage.cost_usd is not None]
    if tracker.unpriced and not priced:
        return "unknown: litellm has no price for this model (give --price-in/--price-out)"
    text = _money(summary.cost_usd)
    if tracker.unpriced:
        text += f" (+{tracker.unpriced} replies with no known price)"
    return text


def print_generation_summary(summary: GenerationSummary, tracker: SpendTracker, run_dir: Path,
                             title: str = "Generation") -> None:
    from tabulate import tabulate

    rows = [
        ["generated", summary.count("generated")],
        ["skipped (already done)", summary.count("skipped")],
        ["failed", summary.count("failed")],
        ["not run (spend cap)", summary.count("not_run")],
        ["prompt tokens", summary.prompt_tokens],
        ["completion tokens", summary.completion_tokens],
        ["cost", _cost_text(summary, tracker)],
    ]
    if tracker.cap_usd is not None:
        rows.append(["spend cap", f"{_money(tracker.cap_usd)}{' - reached' if tracker.reached else ''}"])
    print(f"\n{title} summary ({run_dir})")
    print(tabulate(rows, tablefmt="simple"))
    failures = summary.failures
    if failures:
        print()
        shown = failures[:20]
        print(tabulate([[f.problem_id, f.sample_id, f.turn or "", (f.reason or "")[:100]] for f in shown],
                       headers=["problem", "sample", "turn", "failure"], tablefmt="simple"))
        if len(failures) > len(shown):
            print(f"... and {len(failures) - len(shown)} more (see the *_usage.json files)")
    if tracker.reached:
        print(f"\nspend cap of {_money(tracker.cap_usd)} reached: {summary.count('not_run')} request(s) not sent; "
              "rerun with a higher --max-cost to finish (done samples are skipped)")


def register(sub: argparse._SubParsersAction) -> None:
    from kernelbench.backends import prompt_backends
    from kernelbench.constants import PRECISIONS
    from kernelbench.evaluation.settings import TOLERANCE_MODES, EvalSettings

    p = sub.add_parser(
        "generate", help="generate kernels for a level with an LLM (litellm) into a run directory",
        description="Ask a model for one kernel per problem and sample; writes kernels, prompts, replies and "
                    "usage into a run directory. Rerunning resumes: samples that have a kernel are skipped.",
    )
    add_selection_args(p)
    p.add_argument("--backend", choices=prompt_backends(), default=EvalSettings.backend, help="kernel language asked for")
    p.add_argument("--precision", choices=PRECISIONS, default=EvalSettings.precision, help="precision the prompt states")
    p.add_argument("--tolerance-mode", choices=TOLERANCE_MODES, default=EvalSettings.tolerance_mode,
                   help="tolerance the prompt states: default (1e-4 for fp32) or kernelbench-v0.1 (1e-2)")
    p.add_argument("--gpu", default="H100", help="GPU the prompt targets (H100, H200, A100, L40S, B200) or 'none'")
    add_model_args(p)
    add_run_dir_args(p)
    add_source_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kernelbench.generation.pipeline import PromptOptions, SpendTracker, generate_samples
    from kernelbench.runs import RunDirectory

    problems = select_problems(args)
    options = PromptOptions(args.backend, args.precision, prompt_gpu(args.gpu), args.tolerance_mode)
    client = make_client(args)
    run_path = resolve_run_dir(args, args.backend)
    rd = RunDirectory(run_path, level=args.level)
    check_resume(rd, client.config, options.backend, options.precision)
    record_run_info(rd, args, client.config, options, problems, args.samples)
    tracker = SpendTracker(args.max_cost)
    print(f"Generating {len(problems)} problem(s) x {args.samples} sample(s) of level {args.level} with "
          f"{client.config.model} into {run_path}", file=sys.stderr)
    summary = generate_samples(problems, rd, client, options, samples=args.samples, concurrency=args.concurrency,
                               tracker=tracker, progress=True)
    print_generation_summary(summary, tracker, run_path)
    return 0
