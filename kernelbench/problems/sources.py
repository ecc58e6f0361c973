"""Problem sources: the built-in suite, a KernelBench directory, the Hugging Face dataset, the official set.

Each source returns a ProblemSet; nothing here executes problem code. The sources are a registry
(:class:`ProblemSource` records): ``--source`` choices and :func:`load_problems` read it, and an
unknown name fails as ``unknown problem source 'x' (available: builtin, directory, ...)``.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernelbench.errors import ProblemFormatError, SourceError
from kernelbench.problems.contract import check_problem_code, extra_requirements
from kernelbench.problems.model import LEVELS, Problem, ProblemSet
from kernelbench.registry import Registry

log = logging.getLogger(__name__)

#: The levels of the official board's overall ranking (KernelBench's own leaderboard ranks these).
OFFICIAL_LEVELS = (1, 2, 3)
#: Official levels ranked on a board of their own and never counted in the overall: level 4 loads
#: Hugging Face models (``from_pretrained``), so it is evaluated only where those models can be had.
OFFICIAL_SEPARATE_LEVELS = (4,)
HF_DATASET_ID = "ScalingIntelligence/KernelBench"
_FILE_RE = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_DIR_RE = re.compile(r"^level(\d+)$")


def builtin_root() -> Path:
    return Path(str(resources.files("kernelbench.problems") / "builtin"))


def _make_problem(level: int, problem_id: int, name: str, code: str, source: str, where: str) -> Problem:
    check_problem_code(code, where)
    return Problem(level=level, problem_id=problem_id, name=name, code=code, source=source,
                   requirements=extra_requirements(code))


def _level_dirs(root: Path) -> list[tuple[int, Path]]:
    out = []
    for child in sorted(root.iterdir()):
        m = _LEVEL_DIR_RE.match(child.name)
        if m and child.is_dir():
            out.append((int(m.group(1)), child))
    return out


def load_directory(root: str | Path, levels: Iterable[int] | None = None, source: str | None = None) -> ProblemSet:
    """Load ``<root>/level<N>/<id>_<Name>.py`` files, KernelBench's own layout, unchanged.

    ``root`` may also be a KernelBench checkout, whose problems live in ``<root>/KernelBench``.
    """
    root = Path(root).expanduser()
    if not root.exists():
        raise SourceError(f"problem directory {root} does not exist")
    if not root.is_dir():
        raise SourceError(f"problem directory {root} is not a directory")
    level_dirs = _level_dirs(root)
    if not level_dirs and (root / "KernelBench").is_dir():
        root = root / "KernelBench"
        level_dirs = _level_dirs(root)
    if not level_dirs:
        raise SourceError(f"{root} has no level<N>/ folders (expected e.g. {root}/level1/1_Name.py)")
    wanted = set(levels) if levels is not None else None
    label = source or f"directory:{root}"
    problems = []
    for level, d in level_dirs:
        if wanted is not None and level not in wanted:
            continue
        for f in sorted(d.iterdir()):
            if f.suffix != ".py" or f.name.startswith("__"):
                continue
            m = _FILE_RE.match(f.name)
            if not m:
                log.warning("skipping %s: file name is not <id>_<Name>.py", f)
                continue
            try:
                code = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise SourceError(f"cannot read problem file {f}: {e}") from None
            problems.append(_make_problem(level, int(m.group(1)), f.stem, code, label, str(f)))
    try:
        return ProblemSet(problems, source=label)
    except ValueError as e:
        raise ProblemFormatError(str(e)) from None


def load_builtin(levels: Iterable[int] | None = None) -> ProblemSet:
    """The suite that ships with the package and works offline."""
    return load_directory(builtin_root(), levels=levels, source="builtin")


def _hf_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = re.sub(r"^https?://", "", endpoint).split("/")[0]
    host, _, port = host.partition(":")
    try:
        with socket.create_connection((host, int(port or 443)), timeout=timeout_s):
            return True
    except OSError:
        return False


def _rows_to_problems(rows: Iterable[dict], level_hint: int | None, label: str) -> list[Problem]:
    out = []
    for i, row in enumerate(rows):
        try:
            code = row["code"]
            level = int(row.get("level") or level_hint or 0)
            pid = int(row["problem_id"])
            name = str(row["name"])
        except (KeyError, TypeError, ValueError) as e:
            raise SourceError(
                f"{label}: row {i} lacks the columns code, level, name, problem_id ({e})"
            ) from None
        name = name[:-3] if name.endswith(".py") else name
        out.append(_make_problem(level, pid, name, code, label, f"{label} level {level} problem {pid}"))
    return out


def _load_local_dataset(path: Path, levels: list[int], label: str) -> list[Problem]:
    import datasets  # lazy: heavy, and not needed for evaluation

    if (path / "dataset_dict.json").exists() or (path / "dataset_info.json").exists():
        try:
            loaded = datasets.load_from_disk(str(path))
        except Exception as e:  # datasets raises many types for a damaged folder
            raise SourceError(f"cannot read dataset at {path}: {e}") from None
        if isinstance(loaded, datasets.DatasetDict):
            problems = []
            for lv in levels:
                split = f"level_{lv}"
                if split in loaded:
                    problems.extend(_rows_to_problems(loaded[split], lv, label))
            return problems
        return [p for p in _rows_to_problems(loaded, None, label) if p.level in levels]

    parquet = sorted(path.rglob("*.parquet"))
    if not parquet:
        raise SourceError(
            f"{path} is not a dataset folder (no save_to_disk files and no *.parquet files)"
        )
    problems = []
    for lv in levels:
        files = [str(f) for f in parquet if re.search(rf"level_?{lv}(\D|$)", f.name)]
        if not files:
            continue
        try:
            ds = datasets.load_dataset("parquet", data_files={f"level_{lv}": files}, split=f"level_{lv}")
        except Exception as e:
            raise SourceError(f"cannot read parquet files for level {lv} in {path}: {e}") from None
        problems.extend(_rows_to_problems(ds, lv, label))
    return problems


def load_huggingface(path: str | Path | None = None, levels: Iterable[int] | None = None) -> ProblemSet:
    """The official dataset from the hub, or the same columns from a local folder."""
    wanted = sorted(set(levels)) if levels is not None else list(LEVELS)
    target = str(path) if path else HF_DATASET_ID
    local = Path(target).expanduser()
    if path and (local.exists() or target.startswith((".", "/", "~"))):
        if not local.exists():
            raise SourceError(f"dataset path {local} does not exist")
        if not local.is_dir():
            raise SourceError(f"dataset path {local} is not a directory")
        label = f"huggingface:{local}"
        return ProblemSet(_load_local_dataset(local, wanted, label), source=label)

    other = "use --source builtin (ships with the package) or --source directory --path <KernelBench/KernelBench>"
    if _hf_offline():
        raise SourceError(f"cannot load {target} from the Hugging Face hub: offline mode is set; {other}")
    if not _hub_reachable():
        raise SourceError(f"cannot load {target}: the Hugging Face hub is unreachable; {other}")
    import datasets

    label = f"huggingface:{target}"
    problems = []
    for lv in wanted:
        try:
            ds = datasets.load_dataset(target, split=f"level_{lv}")
        except ValueError as e:  # unknown split
            log.info("dataset %s has no split level_%d: %s", target, lv, e)
            continue
        except Exception as e:
            raise SourceError(f"cannot load {target} split level_{lv}: {e}; {other}") from None
        problems.extend(_rows_to_problems(ds, lv, label))
    return ProblemSet(problems, source=label)


def load_official(path: str | Path | None = None, levels: Iterable[int] | None = None) -> ProblemSet:
    """The official set at the pinned revision, from wherever it is: ``path`` (a KernelBench checkout or
    problem folder, or a local copy of the dataset), else ``./KernelBench/``, else the Hugging Face hub.

    Whatever it is read from must hash the same as the pinned manifest; anything else is refused, so a
    board or score labelled official is the official problems.
    """
    from kernelbench.problems.identity import KERNELBENCH, identify

    candidates = [Path(path).expanduser()] if path else [Path("KernelBench")]
    folder = next((c for c in candidates if c.is_dir() and (_level_dirs(c) or (c / "KernelBench").is_dir())), None)
    if folder is not None:
        problems = load_directory(folder, levels, source=f"kernelbench:{folder}")
    elif path:
        problems = load_huggingface(path, levels)
    else:
        problems = load_huggingface(None, levels)
    ident = identify(problems)
    if ident.name != KERNELBENCH:
        raise SourceError(f"{problems.source} is not the official KernelBench set: its problems are not those of "
                          f"the pinned manifest (got {ident.name}); use --source directory or huggingface for "
                          "other problems")
    return problems


# ------------------------------------------------------------------------------------------- registry
class UnknownSourceError(SourceError, ValueError):
    """The problem source named is not registered; the message lists those that are."""


@dataclass(frozen=True)
class ProblemSource:
    """One place problems come from. ``load(path, levels)`` returns the problem set (``path`` is the
    ``--path`` argument: a folder, a dataset, or None for the source's default)."""

    name: str
    #: One line for ``--help`` and the docs.
    summary: str
    load: Callable[[str | Path | None, Iterable[int] | None], ProblemSet]


def _load_builtin_source(path: str | Path | None, levels: Iterable[int] | None) -> ProblemSet:
    return load_builtin(levels)  # the suite ships with the package: no path


def _load_directory_source(path: str | Path | None, levels: Iterable[int] | None) -> ProblemSet:
    if path is None:
        raise SourceError("--source directory needs --path <folder with level1/, level2/, ...>")
    return load_directory(path, levels)


SOURCE_REGISTRY: Registry[ProblemSource] = Registry("problem source", UnknownSourceError)
SOURCE_REGISTRY.register(ProblemSource("builtin", "the suite shipped with the package (offline)", _load_builtin_source))
SOURCE_REGISTRY.register(ProblemSource("directory", "a folder of level<N>/<id>_<Name>.py files (KernelBench's layout)",
                                       _load_directory_source), aliases=("local",))
SOURCE_REGISTRY.register(ProblemSource("huggingface", "the KernelBench dataset from the hub, or a local copy of it",
                                       load_huggingface), aliases=("hf",))
SOURCE_REGISTRY.register(ProblemSource("kernelbench", "the official set at the pinned revision, checked by hash",
                                       load_official))


def source_names() -> tuple[str, ...]:
    """Every registered problem source, sorted: what ``--source`` accepts."""
    return SOURCE_REGISTRY.names()


def get_source(name: str) -> ProblemSource:
    """The source called ``name`` (or an alias: ``local``, ``hf``); raises :class:`UnknownSourceError`."""
    return SOURCE_REGISTRY.get(name)


def load_problems(source: str = "builtin", path: str | Path | None = None,
                  levels: Iterable[int] | None = None) -> ProblemSet:
    """One entry point for every source, as the CLI and scripts name them."""
    return get_source(source).load(path, levels)


def load_board_problems(source: str = "kernelbench", path: str | Path | None = None) -> ProblemSet:
    """The problems a leaderboard ranks: for ``kernelbench`` the official levels 1-3 (250 problems, the
    overall board) and level 4 (20 problems that load Hugging Face models, a board of its own: see
    :func:`separate_board_levels`); every level of any other source (the built-in demo board has all four,
    all in its overall). The CLI and the CI scripts both use this, so the board, its validation and the
    scores commented on a pull request count the same problems. Loading reads and hashes the files; a
    level-4 file, which calls ``from_pretrained`` at import, is never run here."""
    levels = OFFICIAL_LEVELS + OFFICIAL_SEPARATE_LEVELS if source == "kernelbench" else None
    return load_problems(source, path, levels=levels)


def separate_board_levels(problems: ProblemSet) -> tuple[int, ...]:
    """The levels of ``problems`` that a board ranks on their own, never in its overall score.

    Only the official set has one: level 4, whose problems load Hugging Face models. KernelBench's
    leaderboard ranks levels 1-3, and an overall that mixed in level 4 would rank entries partly by
    whether they could reach the hub. The built-in suite's level 4 builds its models offline from a
    config and stays in the demo board's overall. A set that does not hash as the official one has none.
    """
    from kernelbench.problems.identity import KERNELBENCH, ProblemSetMismatchError, identify

    present = set(problems.levels())
    if not present & set(OFFICIAL_SEPARATE_LEVELS):
        return ()
    try:
        official = identify(problems).name == KERNELBENCH
    except ProblemSetMismatchError:
        return ()
    return tuple(lv for lv in OFFICIAL_SEPARATE_LEVELS if lv in present) if official else ()
