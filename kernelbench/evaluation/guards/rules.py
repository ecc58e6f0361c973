"""The catalogue of static guard rules: one stable id, one severity and the reason it exists.

Severity policy: ``error`` only where the pattern defeats measurement or breaks the rules by
construction (the candidate fails); ``warning`` where the runtime guards decide (the finding is
recorded, the verdict comes from correctness and timing); ``info`` for facts worth showing.
The ids are part of the report format: results, the leaderboard and tests match on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["info", "warning", "error"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    summary: str


_RULES: tuple[Rule, ...] = (
    # errors: the candidate fails on these alone
    Rule("syntax-error", "error", "the source does not parse, so nothing else can be checked"),
    Rule("no-model-new", "error", "no class ModelNew: there is nothing to evaluate"),
    Rule("no-custom-kernel", "error", "the backend's kind of kernel is never defined or built"),
    Rule("kernel-not-launched", "error", "kernels exist but ModelNew.forward never launches one"),
    Rule("monkey-patch", "error", "assigns to or deletes attributes of torch, triton, time, builtins, "
                                  "kernelbench or sys.modules entries: it can fake timings or checks"),
    Rule("introspection", "error", "gc/inspect/frame access to other objects: it can reach reference "
                                   "outputs or the evaluator's state"),
    Rule("threads", "error", "threads or processes can finish work after forward returns"),
    Rule("subprocess", "error", "runs other programs"),
    Rule("network", "error", "network access from candidate code"),
    Rule("process-control", "error", "exits, kills or signals processes: it can cut timing short"),
    Rule("try-fallback", "error", "try/except around the kernel whose handler computes with PyTorch"),
    Rule("compiler", "error", "torch.compile, TorchScript or another compiler does the work"),
    Rule("ctypes", "error", "raw memory and foreign-function access"),
    Rule("ipc", "error", "CUDA IPC or shared storage can read other processes' memory"),
    Rule("dynamic-code", "error", "exec/eval/compile of generated code hides it from the guard"),
    # warnings: recorded; the runtime guards and the correctness check decide
    Rule("side-stream", "warning", "work on a stream the timer does not own"),
    Rule("cuda-event", "warning", "creates CUDA events (timing of its own)"),
    Rule("cuda-graph", "warning", "CUDA graphs replay captured work"),
    Rule("precision-downcast", "warning", "fp16/bf16/TF32 compute: on fp32 problems the tolerance decides"),
    Rule("file-write", "warning", "writes files outside temporary directories"),
    Rule("tensor-subclass", "warning", "tensor subclasses can defer work past the timer (outputs must be "
                                       "plain tensors)"),
    Rule("input-keyed-cache", "warning", "keys on input identity or content (data_ptr, id, hash): "
                                         "results may be reused instead of computed"),
    Rule("stateful-forward", "warning", "forward changes state kept across calls (counters, caches)"),
    Rule("clock-read", "warning", "forward reads a clock: it can tell warm-up from timing"),
    Rule("returns-input", "warning", "forward returns one of its inputs (or a view of it)"),
    Rule("mutates-input", "warning", "forward writes into its inputs"),
    Rule("uninitialised-output", "warning", "returns a freshly allocated tensor nothing writes"),
    Rule("torch-compute", "warning", "PyTorch compute ops run inside forward"),
    Rule("reference-model", "warning", "uses the reference Model itself"),
    Rule("swallowed-kernel-error", "warning", "a kernel build or launch failure is caught and ignored"),
    Rule("rng-seed", "warning", "sets random seeds or RNG state"),
    # info
    Rule("kernel-launch", "info", "where forward launches a custom kernel"),
    Rule("unused-kernel", "info", "a kernel that forward never launches (others are launched)"),
    Rule("backend-flag", "info", "changes a torch.backends setting"),
)

RULES: dict[str, Rule] = {r.id: r for r in _RULES}


def severity_of(rule_id: str) -> Severity:
    return RULES[rule_id].severity
