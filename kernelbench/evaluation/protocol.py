"""What the trusted parent and a worker process say to each other: one dataclass per command and reply.

Both sides import this module and nothing else describes the wire. A message travels over
:class:`~kernelbench.evaluation.channel.Channel` as a JSON object (tensor data follows it as binary
frames, see :mod:`kernelbench.evaluation.transport`): a command carries its name under ``"cmd"``, a
reply its kind under ``"reply"``, and every field of the dataclass under its own name. Decoding is
strict: a missing or unknown key, or an unknown command or reply kind, is a
:class:`~kernelbench.evaluation.channel.ProtocolError` that names it, never a default. Values are
not type-checked here: the parent validates what a candidate sends where it uses it (tensor
descriptors in the transport, guard reports with pydantic), as it always has.

Commands (parent to worker), and the reply each gets (or :class:`ErrorReply` when it raised):

========================  ====================  ===========================================================
command                   reply                 what for
========================  ====================  ===========================================================
:class:`Init`             :class:`InitReply`    create the CUDA context (kept apart from process start)
:class:`Setup`            :class:`SetupReply`   reference: build ``Model`` (compiled, for baseline modes)
:class:`Load`             :class:`LoadReply`    candidate/compile: import the candidate, build ``ModelNew``
:class:`Run`              :class:`DoneReply`    reference: outputs of one correctness trial, kept in a slot
:class:`Run`              :class:`ExportReply`  candidate: one correctness trial, outputs exported
:class:`Compare`          :class:`CompareReply` reference: a candidate's exported outputs against a slot
:class:`Release`          :class:`DoneReply`    candidate: let go of what the last export shared
:class:`Time`             :class:`TimeReply`    time a block of calls (or warm up)
:class:`ExportLast`       :class:`ExportReply`  candidate: export the last timed call's outputs
:class:`CheckPatches`     :class:`PatchReply`   candidate: was anything patched since the import?
:class:`Share`            :class:`ShareReply`   sandboxed candidate (GPU): export through a shared buffer, or not
:class:`CheckShared`      :class:`ShareReply`   reference: can it read a candidate's shared buffer (a probe)?
:class:`Profile`          :class:`ProfileReply` candidate (GPU): one forward under the profiler
:class:`Launches`         :class:`LaunchesReply` candidate (CPU, Triton): launches counted in the interpreter
:class:`Exit`             (none)                leave the command loop
========================  ====================  ===========================================================

A worker's first message is :class:`Ready` (or an :class:`ErrorReply` with ``where="start"``).
Every reply travels with ``cuda_mem`` beside it: the bytes the worker's allocator held afterwards
(``[allocated, reserved]``, or None before CUDA is initialised), which the parent only logs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from kernelbench.evaluation.channel import ProtocolError

#: The header key naming a command, and the one naming a reply's kind.
COMMAND_KEY = "cmd"
REPLY_KEY = "reply"
#: The header key every reply carries beside its fields (see the module docstring).
CUDA_MEM_KEY = "cuda_mem"
#: How many bytes of a shared buffer the :class:`Share` probe fills and :class:`CheckShared` reads.
PROBE_BYTES = 1 << 20
#: The error type a worker reports when its own code (not the candidate's) could not allocate memory: inputs, the
#: export's copies, the reference's copies of an export (kernelbench.evaluation.worker.memory). Never a wrong-output
#: verdict: before candidate code has run the parent records it (or torch's OutOfMemoryError from the reference) as an
#: infrastructure failure, after it as a verdict flagged out of memory (parent/job.py says why).
EVALUATOR_OUT_OF_MEMORY = "EvaluatorOutOfMemory"
OUT_OF_MEMORY_TYPES = (EVALUATOR_OUT_OF_MEMORY, "OutOfMemoryError")


# ---------------------------------------------------------------------------- commands
@dataclass(frozen=True)
class Command:
    """Base of every command; ``NAME`` is its name on the wire (and the worker's ``cmd_<NAME>`` method)."""

    NAME: ClassVar[str] = ""


@dataclass(frozen=True)
class Init(Command):
    """Create the CUDA context; with ``warm``, also load what every job's first GPU work would (``Warm``)."""

    NAME: ClassVar[str] = "init"
    #: False: the context alone, the libraries' warm-up left to a later ``Warm`` (a spare's Init in two steps:
    #: parent/session.py, PAUSE_INITS_ENV, says why).
    warm: bool = True


@dataclass(frozen=True)
class Warm(Command):
    """After an ``Init(warm=False)``: the libraries' warm-up (cuBLAS, cuDNN, the evaluator's own kernels)."""

    NAME: ClassVar[str] = "warm"
    #: How many of its pieces (0.1-0.2 s each) to run now; 0: all that are left.
    pieces: int = 0


@dataclass(frozen=True)
class Setup(Command):
    """Reference: load the problem and build ``Model``; probe whether its forward is random."""

    NAME: ClassVar[str] = "setup"
    code: str
    precision: str
    atol: float
    rtol: float
    init_seed: int
    #: Seed of the inputs the randomness probe runs on (None: no probe).
    probe_seed: int | None
    ieee_fp32: bool
    #: torch.compile mode of a baseline (None: eager).
    compile_mode: str | None


@dataclass(frozen=True)
class Recycle(Command):
    """Reference: forget the problem set up last and be ready for another's ``Setup``, if its code left nothing
    behind (threads, torch's global settings, patches); the reply says which (parent/session.py, REUSE_ENV)."""

    NAME: ClassVar[str] = "recycle"


@dataclass(frozen=True)
class Load(Command):
    """Candidate or compile worker: import the candidate (building its kernels) and build ``ModelNew``."""

    NAME: ClassVar[str] = "load"
    problem_code: str
    source: str
    backend: str
    #: Wrap the backend's kernel launcher before the import (the spec's ``records_launches``, decided by
    #: the parent so the worker needs no backend registry): counts launches on the CPU, records a
    #: candidate's launch arguments for output provenance.
    record_launches: bool
    precision: str
    init_seed: int
    eval_mode: bool
    cache_namespace: str | None
    cache_scope: str | None
    ieee_fp32: bool


@dataclass(frozen=True)
class Run(Command):
    """One correctness trial on inputs made from ``seed``, the forward seeded with ``fwd_seed``.

    The reference keeps inputs and outputs in ``slot``; the candidate exports its outputs, after
    poisoning the allocator's free memory when ``poison`` is set (GPU only).
    """

    NAME: ClassVar[str] = "run"
    seed: int
    fwd_seed: int
    slot: int | None
    poison: bool


@dataclass(frozen=True)
class Compare(Command):
    """Reference: compare exported outputs (and the inputs after the call) with a slot, or ``"last"``."""

    NAME: ClassVar[str] = "compare"
    slot: int | str
    tree: Any
    outputs: Any
    inputs: Any


@dataclass(frozen=True)
class Release(Command):
    NAME: ClassVar[str] = "release"


@dataclass(frozen=True)
class Share(Command):
    """Sandboxed candidate: export CUDA tensors through a buffer shared by descriptor (``enable``), or stop.

    With ``fill``, the buffer's first :data:`PROBE_BYTES` are set to that byte and its descriptor comes with the
    reply, for the reference's :class:`CheckShared` (see :mod:`kernelbench.evaluation.shared_memory`).
    """

    NAME: ClassVar[str] = "share"
    enable: bool
    fill: int | None


@dataclass(frozen=True)
class CheckShared(Command):
    """Reference: map the buffer whose descriptor comes with this command; does it begin with ``fill`` bytes?"""

    NAME: ClassVar[str] = "check_shared"
    fill: int
    size: int


@dataclass(frozen=True)
class Time(Command):
    """Time one call per seed (``warmup``: call until settled instead), fingerprinting outputs if asked
    (with ``warmup``: making the fingerprint's buffers for the outputs once settled)."""

    NAME: ClassVar[str] = "time"
    seeds: list[int]
    fwd_seeds: list[int]
    warmup: bool
    fingerprint: bool
    #: Microseconds of device spin queued before each timed call (``EvalSettings.launch_cushion_us``).
    cushion_us: int


@dataclass(frozen=True)
class ExportLast(Command):
    NAME: ClassVar[str] = "export_last"


@dataclass(frozen=True)
class CheckPatches(Command):
    NAME: ClassVar[str] = "check_patches"
    #: Words for the findings' messages ("while running").
    when: str


@dataclass(frozen=True)
class Profile(Command):
    NAME: ClassVar[str] = "profile"
    seed: int
    fwd_seed: int


@dataclass(frozen=True)
class Launches(Command):
    NAME: ClassVar[str] = "launches"
    seed: int
    fwd_seed: int


@dataclass(frozen=True)
class Exit(Command):
    NAME: ClassVar[str] = "exit"


# ---------------------------------------------------------------------------- replies
@dataclass(frozen=True)
class Reply:
    """Base of every worker message; ``KIND`` is its kind on the wire, ``ok`` whether it is a success."""

    KIND: ClassVar[str] = ""
    ok: ClassVar[bool] = True


@dataclass(frozen=True)
class Ready(Reply):
    """The worker's first message: started, its imports done (its CUDA context waits for :class:`Init`)."""

    KIND: ClassVar[str] = "ready"
    pid: int


@dataclass(frozen=True)
class ErrorReply(Reply):
    """A command raised (the candidate's code, or the reference's), or the worker could not start."""

    KIND: ClassVar[str] = "error"
    ok: ClassVar[bool] = False
    #: The worker's step that failed: a command name, or load/compile/init/start/protocol.
    where: str
    type: str
    message: str
    traceback: str | None
    #: Load only: the extension builds attempted (compile_cache's events); None elsewhere.
    builds: list | None


@dataclass(frozen=True)
class DoneReply(Reply):
    KIND: ClassVar[str] = "done"


@dataclass(frozen=True)
class InitReply(Reply):
    KIND: ClassVar[str] = "init"
    #: The worker's hardware and software (an EnvironmentInfo's fields).
    env: dict
    #: Modules a reference worker imported at start (baselines preload torch.compile's).
    preloaded: list[str]
    #: Seconds the worker spent on this Init (its CUDA context, the libraries' warm-up): what a timing waits for when
    #: a spare's Init is under way as it begins (``spare_wait``).
    init_s: float


@dataclass(frozen=True)
class WarmReply(Reply):
    KIND: ClassVar[str] = "warm"
    #: Seconds the warm-up took (what a timing waits for when a spare's warm-up is under way as it begins).
    warm_s: float
    #: Pieces of the warm-up not yet run (0: the worker is warm).
    left: int = 0


@dataclass(frozen=True)
class SetupReply(Reply):
    KIND: ClassVar[str] = "setup"
    stochastic: bool
    nondeterministic: bool
    #: Compile modes: seconds of the first (compiling) call, and Inductor's cache counters in it.
    compile_s: float | None
    compile_cache: dict | None


@dataclass(frozen=True)
class RecycleReply(Reply):
    KIND: ClassVar[str] = "recycle"
    #: True: the problem is forgotten and the worker takes another Setup; False: it should exit (``detail``: why).
    clean: bool
    detail: str


@dataclass(frozen=True)
class LoadReply(Reply):
    KIND: ClassVar[str] = "load"
    import_s: float
    builds: list
    #: Candidate only (0 for a compile worker): threads started by the import.
    threads_started: int
    #: Candidate only: guard findings (GuardFinding dumps) of patches made by the import.
    findings: list


@dataclass(frozen=True)
class ExportReply(Reply):
    """Outputs and inputs described for the reference (their data in the blobs, or shared)."""

    KIND: ClassVar[str] = "export"
    tree: Any
    outputs: Any
    inputs: Any
    #: A correctness run's threads alive after the forward returned (None for ExportLast).
    threads_started: int | None


@dataclass(frozen=True)
class CompareReply(Reply):
    KIND: ClassVar[str] = "compare"
    passed: bool
    reason: str | None
    max_abs: float | None
    max_rel: float | None
    inputs_modified: bool


@dataclass(frozen=True)
class ShareReply(Reply):
    KIND: ClassVar[str] = "share"
    #: Share: the buffer is shared from now on. CheckShared: the reference read the probe in it.
    shared: bool
    #: Why not, when not.
    detail: str
    #: The shared buffer's size in bytes (0 when there is none).
    size: int


@dataclass(frozen=True)
class TimeReply(Reply):
    KIND: ClassVar[str] = "time"
    #: Per call: start event to the end of the timed stream, and to all streams drained.
    times_ms: list[float]
    drained_ms: list[float]
    wall_s: float
    calls: int
    fingerprints: list
    bounds: list
    threads_started: int


@dataclass(frozen=True)
class PatchReply(Reply):
    KIND: ClassVar[str] = "patches"
    findings: list
    #: None when nothing was imported yet (no snapshot to compare with).
    threads_started: int | None


@dataclass(frozen=True)
class ProfileReply(Reply):
    KIND: ClassVar[str] = "profile"
    kernels: list
    marker_stream: Any
    host_enqueue_us: float
    gpu_busy_us: float
    unowned_outputs: list
    n_outputs: int
    recorded: bool


@dataclass(frozen=True)
class LaunchesReply(Reply):
    KIND: ClassVar[str] = "launches"
    launches: dict
    unowned_outputs: list
    n_outputs: int
    recorded: bool


# ---------------------------------------------------------------------------- the codec
COMMANDS: dict[str, type[Command]] = {c.NAME: c for c in (
    Init, Warm, Setup, Recycle, Load, Run, Compare, Release, Share, CheckShared, Time, ExportLast, CheckPatches,
    Profile, Launches, Exit)}
REPLIES: dict[str, type[Reply]] = {r.KIND: r for r in (
    Ready, ErrorReply, DoneReply, InitReply, WarmReply, SetupReply, RecycleReply, LoadReply, ExportReply,
    CompareReply, ShareReply, TimeReply, PatchReply, ProfileReply, LaunchesReply)}
R = TypeVar("R", bound=Reply)


def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _fields_of(message: Command | Reply) -> dict[str, Any]:
    # Not dataclasses.asdict: that deep-copies every list (thousands of kernel records, every timing).
    return {name: getattr(message, name) for name in _field_names(type(message))}


def _build(cls: type, header: dict, envelope: tuple[str, ...]) -> Any:
    names = _field_names(cls)
    what = f"{cls.__name__} message"
    missing = [n for n in (*envelope, *names) if n not in header]
    if missing:
        raise ProtocolError(f"{what}: missing key(s) {', '.join(map(repr, missing))}")
    unknown = sorted(str(k) for k in header if k not in names and k not in envelope)
    if unknown:
        raise ProtocolError(f"{what}: unknown key(s) {', '.join(map(repr, unknown))}")
    return cls(**{n: header[n] for n in names})


def encode_command(command: Command) -> dict[str, Any]:
    """The JSON header of ``command``."""
    return {COMMAND_KEY: command.NAME, **_fields_of(command)}


def decode_command(header: dict) -> Command:
    """The command in ``header``; ProtocolError for an unknown name or a missing or unknown key."""
    name = header.get(COMMAND_KEY)
    cls = COMMANDS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ProtocolError(f"unknown command {name!r}")
    return _build(cls, header, (COMMAND_KEY,))


def encode_reply(reply: Reply, cuda_mem: list[int] | None = None) -> dict[str, Any]:
    """The JSON header of ``reply``, with the worker's memory counters beside it."""
    return {REPLY_KEY: reply.KIND, CUDA_MEM_KEY: cuda_mem, **_fields_of(reply)}


def decode_reply(header: dict, expect: type[R]) -> tuple[R | ErrorReply, list | None]:
    """The reply in ``header`` and its ``cuda_mem``: an ``expect`` or an :class:`ErrorReply`.

    Any other kind (a reply to a different command) is a ProtocolError, like a missing or unknown key.
    """
    kind = header.get(REPLY_KEY)
    cls = REPLIES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown reply kind {kind!r}")
    if cls is not expect and cls is not ErrorReply:
        raise ProtocolError(f"expected a {expect.__name__}, got a {cls.__name__}")
    reply = _build(cls, header, (REPLY_KEY, CUDA_MEM_KEY))
    return reply, header[CUDA_MEM_KEY]


__all__ = [
    "COMMANDS", "REPLIES", "CheckPatches", "Command", "Compare", "CompareReply", "DoneReply", "ErrorReply",
    "Exit", "ExportLast", "ExportReply", "Init", "InitReply", "Launches", "LaunchesReply", "Load", "LoadReply",
    "PatchReply", "Profile", "ProfileReply", "Ready", "Recycle", "RecycleReply", "Release", "Reply", "Run", "Setup",
    "SetupReply", "Time",
    "TimeReply", "Warm", "WarmReply", "decode_command", "decode_reply", "encode_command", "encode_reply",
]
