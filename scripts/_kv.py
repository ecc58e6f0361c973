"""``key=value`` arguments for the KernelBench-compatible scripts, mapped onto ``kernelbench`` commands.

KernelBench's scripts take ``key=value`` pairs (``run_name=x level=1 server_type=deepseek``). Each
script here declares the keys it accepts; an unknown key is a one-line error that lists them (exit
2), ``--help`` prints them, and keys kept only so that KernelBench command lines still run are named
on stderr as ignored. The scripts then call the ``kernelbench`` command, which does the work.
"""

from __future__ import annotations

import ast
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REQUIRED = object()
_NONE = {"none", "null", ""}
_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}

#: server_type -> litellm provider prefix (KernelBench's server types, plus a few more).
PROVIDER_PREFIX: dict[str, str] = {
    "openai": "openai", "anthropic": "anthropic", "deepseek": "deepseek", "google": "gemini",
    "gemini": "gemini", "together": "together_ai", "together_ai": "together_ai", "fireworks": "fireworks_ai",
    "fireworks_ai": "fireworks_ai", "openrouter": "openrouter", "xai": "xai", "mistral": "mistral",
    "groq": "groq",
}
LOCAL_SERVER_TYPES = ("sglang", "vllm", "local")
DEFAULT_LOCAL_API_BASE = "http://localhost:30000/v1"
_KNOWN_PREFIXES = set(PROVIDER_PREFIX.values()) | {"hosted_vllm", "bedrock", "vertex_ai", "azure", "ollama"}


class KvError(Exception):
    """Bad key=value input; the message is one line meant for the user."""


@dataclass(frozen=True)
class Key:
    name: str
    kind: str = "str"  # str, int, float, bool, list
    default: Any = None
    help: str = ""
    #: Accepted for compatibility with KernelBench command lines, but it changes nothing here.
    ignored: str | None = None


class KvArgs:
    """Parsed values as attributes; ``given`` holds the keys the user actually wrote."""

    def __init__(self, values: dict[str, Any], given: set[str]):
        self.__dict__.update(values)
        self.given = given

    def get(self, name: str, default: Any = None) -> Any:
        return self.__dict__.get(name, default)


def _convert(key: Key, raw: str) -> Any:
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    if text.lower() in _NONE:
        return None
    try:
        if key.kind == "int":
            return int(text)
        if key.kind == "float":
            return float(text)
        if key.kind == "bool":
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError
        if key.kind == "list":
            if text[:1] in "[(":
                value = ast.literal_eval(text)
                return list(value)
            return [part.strip() for part in text.split(",") if part.strip()]
    except (ValueError, SyntaxError):
        expected = {"int": "an integer", "float": "a number", "bool": "true or false",
                    "list": "a list such as [1,10] or 1,10"}[key.kind]
        raise KvError(f"{key.name}={raw!r}: expected {expected}") from None
    return text


def usage(prog: str, description: str, keys: Sequence[Key]) -> str:
    lines = [f"usage: python {prog} key=value ...", "", description, "", "keys:"]
    width = max(len(k.name) for k in keys)
    for k in keys:
        if k.default is REQUIRED:
            default = " (required)"
        elif k.default is None or k.default == "" or "default" in k.help:
            default = ""
        else:
            default = f" (default {k.default})"
        note = f" [ignored: {k.ignored}]" if k.ignored else ""
        lines.append(f"  {k.name:<{width}}  {k.help}{default}{note}")
    return "\n".join(lines)


#: KernelBench's pydra presets (``.greedy``, ``.verbose_logging``) as the keys they stand for here;
#: the first key a script has is set. KernelBench's ``.greedy`` only sets a flag its own code reads
#: as "greedy decoding"; here that is temperature 0.
PRESETS: dict[str, tuple[tuple[str, str], ...]] = {
    "greedy": (("temperature", "0"),),
    "verbose_logging": (("verbose_logging", "true"), ("verbose", "true")),
}


def expand_presets(argv: Sequence[str], keys: Sequence[Key]) -> list[str]:
    """Replace ``.preset`` arguments by the ``key=value`` they mean for this script (KvError if none)."""
    names = {k.name for k in keys}
    out: list[str] = []
    for arg in argv:
        if not arg.startswith("."):
            out.append(arg)
            continue
        preset = arg[1:]
        if preset not in PRESETS:
            raise KvError(f"unknown preset {arg!r} (KernelBench presets: {', '.join('.' + p for p in PRESETS)})")
        chosen = next(((k, v) for k, v in PRESETS[preset] if k in names), None)
        if chosen is None:
            wanted = " or ".join(f"{k}={v}" for k, v in PRESETS[preset])
            raise KvError(f"preset {arg} means {wanted}, which this script does not take")
        out.insert(0, f"{chosen[0]}={chosen[1]}")  # explicit key=value arguments still win
    return out


def parse_kv(argv: Sequence[str], keys: Sequence[Key]) -> KvArgs:
    """Parse ``key=value`` (also ``--key=value``, a bare ``key`` for a true boolean, and ``.presets``)."""
    by_name = {k.name: k for k in keys}
    values: dict[str, Any] = {k.name: (None if k.default is REQUIRED else k.default) for k in keys}
    given: set[str] = set()
    for arg in expand_presets(argv, keys):
        name, sep, raw = arg.partition("=")
        name = name.strip().lstrip("-").replace("-", "_")
        key = by_name.get(name)
        if key is None:
            raise KvError(f"unknown key {name!r}; accepted keys: {', '.join(sorted(by_name))}")
        if not sep:
            if key.kind != "bool":
                raise KvError(f"{name} needs a value: {name}=...")
            raw = "true"
        values[name] = _convert(key, raw)
        given.add(name)
    missing = [k.name for k in keys if k.default is REQUIRED and values[k.name] is None]
    if missing:
        raise KvError(f"missing required key(s): {', '.join(f'{m}=...' for m in missing)}")
    return KvArgs(values, given)


def parse_or_exit(prog: str, description: str, keys: Sequence[Key], argv: Sequence[str] | None = None) -> KvArgs:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        print(usage(prog, description, keys))
        raise SystemExit(0)
    try:
        args = parse_kv(argv, keys)
    except KvError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    for k in keys:
        if k.ignored and k.name in args.given:
            print(f"{prog}: note: {k.name} is accepted for compatibility and ignored: {k.ignored}", file=sys.stderr)
    return args


# ---------------------------------------------------------------- mappings onto kernelbench options
def litellm_model(server_type: str | None, model_name: str | None, api_base: str | None) -> tuple[str, str | None]:
    """KernelBench's (server_type, model_name) as a litellm model string and an api_base."""
    if not model_name:
        raise KvError("model_name= is required (e.g. model_name=deepseek-chat)")
    st = (server_type or "").strip().lower()
    if st in LOCAL_SERVER_TYPES:
        model = model_name if model_name.startswith(("openai/", "hosted_vllm/")) else f"openai/{model_name}"
        return model, api_base or DEFAULT_LOCAL_API_BASE
    if st in ("", "litellm"):
        return model_name, api_base
    if st not in PROVIDER_PREFIX:
        known = ", ".join(sorted([*PROVIDER_PREFIX, *LOCAL_SERVER_TYPES, "litellm"]))
        raise KvError(f"unknown server_type {server_type!r} (choose from {known})")
    if model_name.split("/", 1)[0] in _KNOWN_PREFIXES:
        return model_name, api_base
    return f"{PROVIDER_PREFIX[st]}/{model_name}", api_base


def ids_option(args: KvArgs) -> str | None:
    """``subset`` or KernelBench's ``problem_ids`` (a list of ids) as ``--problem-ids``; not both."""
    subset, raw = subset_to_ids(args.get("subset")), args.get("problem_ids")
    if raw is None:
        return subset
    items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    try:
        ids = [int(i) for i in items]
    except (TypeError, ValueError):
        raise KvError(f"problem_ids={raw!r}: expected a list of problem ids, e.g. problem_ids=[71,86,95]") from None
    if subset is not None:
        raise KvError("give subset= or problem_ids=, not both")
    # Unlike subset=(start, end), problem_ids is always a list: [3, 7] means problems 3 and 7.
    return ",".join(str(i) for i in ids)


def subset_to_ids(subset: Any) -> str | None:
    """KernelBench's ``subset=(start,end)`` (inclusive) or a list of ids as ``--problem-ids``."""
    if subset is None:
        return None
    items = list(subset) if isinstance(subset, (list, tuple)) else [subset]
    if all(i is None for i in items):
        return None
    try:
        ids = [int(i) for i in items]
    except (TypeError, ValueError):
        raise KvError(f"subset={subset!r}: expected (start, end) or a list of problem ids") from None
    if len(ids) == 2 and ids[0] <= ids[1]:
        return f"{ids[0]}-{ids[1]}"
    return ",".join(str(i) for i in ids)


def source_options(dataset_src: str | None, dataset_name: str | None, dataset_path: str | None,
                   run_dir: Path | None = None) -> list[str]:
    """``dataset_src`` as ``--source``/``--path``. ``local`` means a KernelBench problem folder."""
    src = (dataset_src or "").strip().lower()
    if src == "builtin":
        return ["--source", "builtin"]
    if src in ("huggingface", "hf"):
        target = dataset_path or (dataset_name if dataset_name and dataset_name != "ScalingIntelligence/KernelBench"
                                  else None)
        return ["--source", "huggingface"] + (["--path", target] if target else [])
    if src == "local":
        folder = Path(dataset_path) if dataset_path else Path("KernelBench")
        if folder.is_dir():
            return ["--source", "directory", "--path", str(folder)]
        if run_dir is not None and (run_dir / "run.json").exists():
            print(f"note: dataset_src=local: no {folder}/ folder; using the problem source the run recorded",
                  file=sys.stderr)
            return []
        raise KvError(f"dataset_src=local needs KernelBench's problem folder ({folder}/level1/...): pass "
                      f"dataset_path=<folder>, or use dataset_src=builtin or dataset_src=huggingface")
    raise KvError(f"unknown dataset_src {dataset_src!r} (choose from builtin, local, huggingface)")


def verbosity(args: KvArgs) -> list[str]:
    return ["-v"] if args.get("verbose") or args.get("verbose_logging") else []


def run_kernelbench(prog: str, argv: list[str]) -> int:
    """Show the equivalent command, then run it in this process."""
    from kernelbench.cli.main import main

    print(f"{prog}: running: kernelbench {shlex.join(argv)}", file=sys.stderr)
    return main(argv)


def script_main(prog: str, doc: str, keys: Sequence[Key], build_argv: Callable[[KvArgs], list[str]],
                argv: Sequence[str] | None = None) -> int:
    """The whole ``main()`` of a key=value script: parse (``--help``, exit 2 on a bad key), map, run.

    Every script is the same three steps and differs only in its keys and its ``build_argv``; a
    ``KvError`` from the mapping is the same one-line error and exit 2 as one from parsing.
    """
    args = parse_or_exit(prog, doc.strip().splitlines()[0], keys, argv)
    try:
        kb_argv = build_argv(args)
    except KvError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    return run_kernelbench(prog, kb_argv)


def add(argv: list[str], flag: str, value: Any) -> None:
    if value is not None:
        argv += [flag, str(value)]


# ---------------------------------------------------------------- keys shared by several scripts
def dataset_keys(src_default: Any = REQUIRED) -> list[Key]:
    return [
        Key("dataset_src", "str", src_default, "builtin (shipped suite), local (a KernelBench folder) or huggingface"),
        Key("dataset_name", "str", "ScalingIntelligence/KernelBench", "Hugging Face dataset id or local dataset path"),
        Key("dataset_path", "str", None, "folder with level1/, level2/... for dataset_src=local (default ./KernelBench)"),
    ]


def model_keys() -> list[Key]:
    return [
        Key("server_type", "str", None, "openai, anthropic, deepseek, google, together, fireworks, openrouter, "
                                        "sglang, vllm, local or litellm"),
        Key("model_name", "str", None, "model name (for litellm: the full model string)"),
        Key("api_base", "str", None, f"OpenAI-compatible server URL (sglang/vllm default {DEFAULT_LOCAL_API_BASE})"),
        Key("max_tokens", "int", None, "reply token limit"),
        Key("temperature", "float", None, "sampling temperature (kernelbench default 0)"),
        Key("is_reasoning_model", "bool", False, "send reasoning_effort to the model"),
        Key("reasoning_effort", "str", "low", "minimal, low, medium or high (with is_reasoning_model=true)"),
        Key("budget_tokens", "int", 0, "Claude thinking budget", ignored="use reasoning_effort"),
        Key("request_timeout", "float", None, "seconds before a request is abandoned (default 600)"),
        Key("num_retries", "int", None, "retries on rate limits and server errors (default 5)"),
        Key("max_cost", "float", None, "stop sending requests after this many USD"),
        Key("env_file", "str", None, "file with API keys as KEY=VALUE lines (default .env)"),
        Key("api_key_env", "str", None, "name of the variable that holds the API key"),
    ]


def model_options(args: KvArgs) -> list[str]:
    model, api_base = litellm_model(args.server_type, args.model_name, args.api_base)
    argv = ["--model", model]
    add(argv, "--api-base", api_base)
    add(argv, "--max-tokens", args.max_tokens)
    add(argv, "--temperature", args.temperature)
    if args.is_reasoning_model and args.reasoning_effort:
        argv += ["--reasoning-effort", str(args.reasoning_effort)]
    add(argv, "--request-timeout", args.request_timeout)
    add(argv, "--retries", args.num_retries)
    add(argv, "--max-cost", args.max_cost)
    add(argv, "--env-file", args.env_file)
    add(argv, "--api-key-env", args.api_key_env)
    return argv


def prompt_keys() -> list[Key]:
    return [
        Key("prompt_option", "str", "one_shot", "one_shot is the prompt here (one worked example)"),
        Key("include_hardware_info", "bool", False, "describe the target GPU in the prompt"),
        Key("hardware_gpu_name", "str", None, "GPU the prompt describes (H100, H200, A100, L40S, B200)"),
        Key("custom_prompt_key", "str", None, "KernelBench custom prompt (not supported)"),
    ]


def prompt_options(args: KvArgs) -> list[str]:
    if args.custom_prompt_key:
        raise KvError("custom_prompt_key is not supported: the prompts live in kernelbench/prompts/*.j2")
    if (args.prompt_option or "one_shot").lower() != "one_shot":
        raise KvError(f"prompt_option={args.prompt_option}: only one_shot is available")
    if args.include_hardware_info:
        if not args.hardware_gpu_name:
            raise KvError("include_hardware_info=true needs hardware_gpu_name=... (e.g. H100)")
        return ["--gpu", str(args.hardware_gpu_name)]
    return ["--gpu", "none"]


def eval_keys() -> list[Key]:
    from kernelbench.evaluation.settings import EvalSettings  # the defaults the kernelbench command applies

    return [
        Key("eval_mode", "str", "local", "local (this machine's GPUs, or its CPU) or modal"),
        Key("gpu", "str", "H100", "GPU type for eval_mode=modal: H100, A100-80GB, L40S, B200"),
        Key("gpu_arch", "list", None, "CUDA architectures", ignored="the evaluator builds for the GPU it runs on"),
        Key("num_correct_trials", "int", None,
            f"correctness trials on fresh inputs (default {EvalSettings.correctness_trials})"),
        Key("num_perf_trials", "int", None, "timed trials",
            ignored="timing runs until the median is stable or timing_budget is spent"),
        Key("timing_budget", "float", None, f"seconds of timed calls per side (default {EvalSettings.timing_budget_s:g})"),
        Key("measure_performance", "bool", True, "time the kernel (false: correctness only)"),
        Key("timeout", "float", None,
            f"seconds allowed per evaluation stage (default {EvalSettings.stage_timeout_s:g})"),
        Key("tolerance_mode", "str", None, "default or kernelbench-v0.1 (1e-2 everywhere)"),
        Key("timing_method", "str", "cuda_event", "cuda_event only: CUDA events around each call, L2 flushed, "
            "reference interleaved"),
        check_kernel_key(),
    ]


def check_kernel_key() -> Key:
    return Key("check_kernel", "bool", True, "static and runtime guards (always on; false is refused)")


def check_kernel_option(args: KvArgs) -> None:
    """``check_kernel=true`` is what always happens; ``false`` cannot be honoured, so it is an error."""
    if args.get("check_kernel") is False:
        raise KvError("check_kernel=false is not supported: the static and runtime guards are part of the verdict "
                      "(a kernel that defeats the timing is not counted correct), so they always run; findings "
                      "that do not defeat measurement are only recorded")


#: KernelBench's timing methods; only the one our protocol is built on is accepted.
KERNELBENCH_TIMING_METHODS = ("cuda_event", "do_bench", "do_bench_impl", "host_time", "nsight_python")


def timing_method_option(args: KvArgs) -> None:
    method = (args.get("timing_method") or "cuda_event").strip().lower()
    if method == "cuda_event":
        return
    known = method in KERNELBENCH_TIMING_METHODS
    raise KvError(f"timing_method={method} is {'not supported' if known else 'unknown'}: the evaluator times "
                  "with CUDA events only (L2 flushed before each call, reference interleaved, trials until the "
                  "median is stable), so that every speedup means the same thing; drop the key or pass "
                  "timing_method=cuda_event")


def eval_options(args: KvArgs) -> list[str]:
    from kernelbench.runners import runner_names

    mode = (args.eval_mode or "local").lower()
    if mode not in runner_names():
        raise KvError(f"eval_mode={args.eval_mode}: choose {' or '.join(runner_names())}")
    timing_method_option(args)
    check_kernel_option(args)
    argv = ["--runner", mode]
    if mode == "modal":
        argv += ["--gpu", str(args.gpu or "H100")]
    add(argv, "--correctness-trials", args.num_correct_trials)
    add(argv, "--timing-budget", args.timing_budget)
    if args.measure_performance is False:
        argv.append("--no-timing")
    add(argv, "--timeout", args.timeout)
    add(argv, "--tolerance-mode", args.tolerance_mode)
    return argv
