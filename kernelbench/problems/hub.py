"""Problems that load a model from the Hugging Face hub (official level 4), and the hub cache they read.

A level-4 problem file calls ``AutoConfig.from_pretrained("gpt2")`` at import and
``AutoModelForCausalLM.from_pretrained(...)`` when ``Model`` is built; ``ModelNew`` usually does the
same. Where the evaluator has no network (a Modal GPU function, a sandboxed candidate) those calls can
only read a cache that trusted code filled beforehand. This module holds the three pieces of that:

* :func:`hub_needs` reads, from the problem's source and without running it, which models it loads;
* :func:`fetch_models` (trusted code only: it talks to the hub, possibly with a token) puts each model's
  config and PyTorch weights into a hub cache, keyed by model id and the commit it resolved to;
* :func:`missing_models` tells, offline, whether a cache holds what a problem needs;
* :func:`local_hub_blocker` says why this machine's evaluator cannot load them (the local runner).

The cache has the hub's own layout (``models--<org>--<name>/refs``, ``snapshots/<commit>``), so
``from_pretrained`` with ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` pointing at it loads from it
unchanged, on the reference side and the candidate side alike.
"""

from __future__ import annotations

import ast
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: A hub model id: ``name`` or ``org/name``, the characters the hub allows, no ``..``.
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
#: Config files a model needs besides its weights (generation_config is optional on the hub).
CONFIG_FILES: tuple[str, ...] = ("config.json", "generation_config.json")
#: Revision level-4 problems load (their files name no revision).
DEFAULT_REVISION = "main"


def valid_model_id(model_id: str) -> bool:
    return bool(_MODEL_ID.fullmatch(model_id)) and ".." not in model_id


@dataclass(frozen=True)
class HubNeeds:
    """What a problem loads from the hub: model ids read from its source, and calls that could not be read."""

    models: tuple[str, ...] = ()
    #: ``from_pretrained`` calls whose model is not a string the source spells out (``line N``).
    unresolved: tuple[str, ...] = ()

    @property
    def needed(self) -> bool:
        return bool(self.models or self.unresolved)


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "literal"`` assignments (``model_name = "gpt2"``)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            out[node.targets[0].id] = node.value.value
    return out


def hub_needs(code: str) -> HubNeeds:
    """The hub models ``code`` loads, from its ``from_pretrained(...)`` calls, read statically.

    A call's first argument counts when it is a string literal or a module-level name bound to one
    (the official problems' ``model_name``); ``from_pretrained(self.model_name, ...)`` inside ``Model``
    counts as the module-level ``model_name``, which is what ``get_init_inputs`` passes. Any other
    argument is listed in ``unresolved``: such a problem cannot be prepared for an offline run.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return HubNeeds()
    strings = _module_strings(tree)
    models: set[str] = set()
    unresolved: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "from_pretrained"):
            continue
        arg = node.args[0] if node.args else next((k.value for k in node.keywords
                                                   if k.arg == "pretrained_model_name_or_path"), None)
        value = None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            value = arg.value
        elif isinstance(arg, ast.Name) and arg.id in strings:
            value = strings[arg.id]
        elif isinstance(arg, ast.Attribute) and arg.attr in strings:
            value = strings[arg.attr]  # self.model_name, set from the module's model_name
        if value is not None and valid_model_id(value):
            models.add(value)
        else:
            unresolved.append(f"line {node.lineno}")
    return HubNeeds(models=tuple(sorted(models)), unresolved=tuple(unresolved))


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The hub cache ``from_pretrained`` reads: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else the default."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    return Path(env.get("HOME") or Path.home()) / ".cache" / "huggingface" / "hub"


def select_files(filenames: Iterable[str]) -> list[str]:
    """The files of a model repository that ``from_pretrained`` needs for PyTorch: configs and one weight format.

    Safetensors are preferred (as ``from_pretrained`` does); ``pytorch_model*.bin`` only where a
    repository has no safetensors. TensorFlow, Flax, ONNX and tokenizer files are left out: a level-4
    repository may hold gigabytes of those. Raises ValueError when there is no PyTorch weight file.
    """
    top = [f for f in filenames if "/" not in f]
    configs = [f for f in top if f in CONFIG_FILES]
    safetensors = [f for f in top if f.endswith(".safetensors") or f.endswith(".safetensors.index.json")]
    binaries = [f for f in top if re.fullmatch(r"pytorch_model(-\d+-of-\d+)?\.bin(\.index\.json)?", f)]
    weights = safetensors if any(f.endswith(".safetensors") for f in safetensors) else binaries
    if "config.json" not in configs:
        raise ValueError("the repository has no config.json")
    if not any(f.endswith((".safetensors", ".bin")) for f in weights):
        raise ValueError("the repository has no PyTorch weights (model*.safetensors or pytorch_model*.bin)")
    return sorted(configs) + sorted(weights)


def _repo_folder(cache_dir: Path, model_id: str) -> Path:
    return Path(cache_dir) / ("models--" + model_id.replace("/", "--"))


def cached_snapshot(model_id: str, cache_dir: str | Path, revision: str = DEFAULT_REVISION) -> Path | None:
    """The snapshot folder the cache holds for ``model_id`` at ``revision``, if it has a config and weights."""
    repo = _repo_folder(Path(cache_dir), model_id)
    if re.fullmatch(r"[0-9a-f]{40}", revision):
        commit = revision
    else:
        try:
            commit = (repo / "refs" / revision).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
    snap = repo / "snapshots" / commit
    try:
        names = {p.name for p in snap.iterdir() if p.is_file()}
    except OSError:
        return None
    if "config.json" not in names or not any(n.endswith((".safetensors", ".bin")) for n in names):
        return None
    return snap


def missing_models(models: Iterable[str], cache_dir: str | Path, revision: str = DEFAULT_REVISION) -> list[str]:
    """The models of ``models`` that the cache cannot serve offline."""
    return [m for m in models if cached_snapshot(m, cache_dir, revision) is None]


#: Names the hub cache the local evaluator's workers read (and a sandboxed candidate sees, read-only).
HUB_CACHE_ENV = "HF_HUB_CACHE"


def local_hub_blocker(code: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Why a problem that loads hub models cannot be evaluated on this machine, or None if it can.

    The local evaluator fetches nothing: its workers run with a private ``HOME`` (so the default cache
    under ``~/.cache`` is not theirs) and, sandboxed, without network; they load hub models only from
    the cache ``HF_HUB_CACHE`` names, which a sandbox shows read-only. So that folder must be set and
    hold every model the problem names. Calls whose model the source does not spell out cannot be
    checked here and are left to the evaluation.
    """
    needs = hub_needs(code)
    if not needs.models:
        return None
    env = os.environ if environ is None else environ
    names = ", ".join(needs.models)
    other = "or evaluate on Modal (--runner modal), whose trusted function fetches them"
    cache = env.get(HUB_CACHE_ENV)
    if not cache:
        return (f"loads {names} from the Hugging Face hub, and the local evaluator reads hub models only from the "
                f"cache {HUB_CACHE_ENV} names (its workers have a private HOME and, sandboxed, no network): set "
                f"{HUB_CACHE_ENV} to a hub cache holding them, {other}")
    missing = missing_models(needs.models, cache)
    if not missing:
        return None
    listed = ", ".join(repr(m) for m in missing)
    return (f"needs hub model(s) {', '.join(missing)}, which the hub cache {HUB_CACHE_ENV}={cache} lacks: put them there "
            f"first (python -c \"from kernelbench.problems.hub import fetch_models; fetch_models([{listed}], '{cache}')\"), "
            f"{other}")


@dataclass
class HubFetch:
    """What the trusted side did for one model: where it stands in the cache, or why it is not there."""

    model_id: str
    revision: str = DEFAULT_REVISION
    #: The commit ``revision`` resolved to (the snapshot every later evaluation loads).
    commit: str | None = None
    files: list[str] = field(default_factory=list)
    size_bytes: int = 0
    #: True when the cache already held it (nothing was downloaded).
    cached: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.commit is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HubFetch:
        known = {k: data[k] for k in ("model_id", "revision", "commit", "files", "size_bytes", "cached", "error")
                 if k in data}
        return cls(**known)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _snapshot_entry(model_id: str, revision: str, snap: Path, cached: bool) -> HubFetch:
    files = sorted(p.name for p in snap.iterdir() if p.is_file())
    size = sum((snap / f).stat().st_size for f in files)
    return HubFetch(model_id=model_id, revision=revision, commit=snap.name, files=files, size_bytes=size,
                    cached=cached)


def fetch_models(models: Sequence[str], cache_dir: str | Path, *, revision: str = DEFAULT_REVISION,
                 token: str | None = None, endpoint: str | None = None) -> list[HubFetch]:
    """Put each model's config and PyTorch weights into ``cache_dir``; one :class:`HubFetch` per model.

    Trusted code only: this talks to the hub (``endpoint``, default huggingface.co) with ``token``.
    A model the cache already holds at ``revision`` is not downloaded again, so every evaluation
    after the first loads the same commit. Errors (unknown or gated model, no network) come back in
    the entry, never raised, so one bad model does not stop the others.
    """
    out: list[HubFetch] = []
    cache = Path(cache_dir)
    for model_id in models:
        if not valid_model_id(model_id):
            out.append(HubFetch(model_id=model_id, revision=revision, error="not a valid hub model id"))
            continue
        snap = cached_snapshot(model_id, cache, revision)
        if snap is not None:
            out.append(_snapshot_entry(model_id, revision, snap, cached=True))
            continue
        try:
            from huggingface_hub import HfApi, snapshot_download

            info = HfApi(endpoint=endpoint).model_info(model_id, revision=revision, token=token or False)
            wanted = select_files(s.rfilename for s in (info.siblings or []))
            path = snapshot_download(model_id, revision=revision, cache_dir=str(cache), allow_patterns=wanted,
                                     token=token or False, endpoint=endpoint)
        except Exception as e:  # the hub's errors (404, 401 gated, connection) and select_files' ValueError
            log.warning("could not fetch %s@%s: %s", model_id, revision, _describe(e))
            out.append(HubFetch(model_id=model_id, revision=revision, error=_describe(e)))
            continue
        snap = cached_snapshot(model_id, cache, revision)
        if snap is None:  # downloaded, yet offline loading would not find it: say so rather than fail later
            out.append(HubFetch(model_id=model_id, revision=revision,
                                error=f"downloaded to {path} but the cache does not serve {revision} offline"))
            continue
        log.info("fetched %s@%s (%s)", model_id, revision, snap.name)
        out.append(_snapshot_entry(model_id, revision, snap, cached=False))
    return out
