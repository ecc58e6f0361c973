"""The one writer of baseline files: times and failures merged in one at a time, the file rewritten after each.

Every write replaces the whole file atomically, so a killed run leaves the last complete state and a
rerun resumes from it. A file is only extended by measurements comparable with what it holds: the same
GPU type, timing protocol, precision and problem set; anything else is refused unless forced (or the
file is restarted). Local runs (:mod:`kernelbench.baselines.run`), Modal runs
(:mod:`kernelbench.baselines.remote`) and the ``modal run`` entry point all write through it.
"""

from __future__ import annotations

import datetime
import json
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernelbench import TIMING_PROTOCOL_VERSION
from kernelbench.baselines.format import (
    EAGER,
    LEVEL_KEY,
    BaselineEntry,
    level_key,
    mode_order,
    one_line,
    sorted_levels,
)
from kernelbench.errors import BaselineError
from kernelbench.hardware import gpu_family
from kernelbench.io_utils import atomic_write_json
from kernelbench.problems.identity import ref_of, set_of_problem
from kernelbench.problems.model import Problem

log = logging.getLogger(__name__)

#: The environment block's keys, in the order the file shows them (any others follow, sorted).
_ENV_KEYS = ("gpu_name", "gpu_arch", "driver", "cuda", "torch", "triton", "python", "date", "timing_protocol",
             "precision")
#: Software whose version changing between two measurements of one file is worth a note.
_SOFTWARE_KEYS = ("driver", "cuda", "torch", "triton")


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


class BaselineFile:
    """A baseline file being measured into: entries and failures merged in, written after each one.

    ``restart_flag`` and ``force_flag`` are how the calling command spells "start over" and "mix anyway",
    for its error messages (``force_flag=None``: the command has no such option).
    """

    def __init__(self, path: str | Path, data: dict | None = None, *, gpu_name: str | None = None,
                 force: bool = False, restart_flag: str = "--restart", force_flag: str | None = "--force"):
        self.path = Path(path)
        self.data: dict[str, Any] = data if data is not None else {}
        #: The GPU type the file is for, until its first time says so itself.
        self.gpu = gpu_family(gpu_name)
        self.force = force
        self.notes: list[str] = []
        self.restart_flag = restart_flag
        self.force_flag = force_flag

    # -- opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, gpu_name: str | None = None, *, precision: str | None = "fp32",
             restart: bool = False, force: bool = False, restart_flag: str = "--restart",
             force_flag: str | None = "--force") -> BaselineFile:
        """Open ``path`` to extend it, checking it holds times comparable with what will be measured.

        ``gpu_name`` is the GPU about to be measured (any spelling: ``H100``, the driver's name);
        ``restart`` ignores what is there (it is replaced at the first write); ``force`` mixes anyway.
        """
        path = Path(path)
        flags = dict(gpu_name=gpu_name, force=force, restart_flag=restart_flag, force_flag=force_flag)
        if restart or not path.exists():
            return cls(path, {}, **flags)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BaselineError(f"cannot resume from {path}: not valid JSON ({e}); move it away or pass "
                                f"{restart_flag}") from None
        if not isinstance(data, dict):
            raise BaselineError(f"cannot resume from {path}: not a baseline file; move it away or pass {restart_flag}")
        f = cls(path, data, **flags)
        problems = f._compatibility_problems(gpu_name, precision)
        if problems and not force:
            mix = f", or {force_flag} to mix" if force_flag else ""
            raise BaselineError(f"{path} {problems[0]}: pass {restart_flag} to start the file over{mix}")
        for p in problems:
            f.notes.append(f"{path} {p} (mixed anyway: {force_flag or 'forced'})")
            log.warning("%s %s (mixing anyway: forced)", path, p)
        return f

    def _compatibility_problems(self, gpu_name: str | None, precision: str | None) -> list[str]:
        out = []
        env = self.environment
        has_entries = self.count() > 0
        file_gpu = gpu_family(env.get("gpu_name")) or gpu_family(self._hardware_in_entries())
        if gpu_name and file_gpu and file_gpu != gpu_family(gpu_name):
            out.append(f"holds {file_gpu} times; measuring {gpu_family(gpu_name)} into it would mix GPUs")
        protocol = env.get("timing_protocol")
        if has_entries and protocol != TIMING_PROTOCOL_VERSION:
            what = f"timing protocol {protocol!r}" if protocol else "no timing protocol (not measured by kernelbench)"
            out.append(f"was measured with {what}, not {TIMING_PROTOCOL_VERSION!r}: the times would not be comparable")
        file_precision = env.get("precision")
        if has_entries and precision and file_precision and file_precision != precision:
            out.append(f"holds {file_precision} times; measuring {precision} into it would mix precisions")
        return out

    def _hardware_in_entries(self) -> str | None:
        for block in self._level_blocks():
            for entries in block.values():
                for e in entries.values():
                    if isinstance(e, dict) and e.get("hardware"):
                        return e["hardware"]
        return None

    # -- reading ------------------------------------------------------------------------------
    @property
    def environment(self) -> dict[str, Any]:
        env = self.data.get("environment")
        return env if isinstance(env, dict) else {}

    def _mode_block(self, mode: str, create: bool = False) -> dict:
        if mode == EAGER:
            return self.data
        modes = self.data.setdefault("modes", {}) if create else (self.data.get("modes") or {})
        return modes.setdefault(mode, {}) if create else (modes.get(mode) or {})

    def _level_blocks(self) -> list[dict[str, dict]]:
        out = []
        for mode in [EAGER, *(self.data.get("modes") or {})]:
            block = self._mode_block(mode)
            out.append({k: v for k, v in block.items() if LEVEL_KEY.match(k) and isinstance(v, dict)})
        return out

    def entry(self, level: int, filename: str, mode: str = EAGER) -> BaselineEntry | None:
        raw = (self._mode_block(mode).get(level_key(level)) or {}).get(filename)
        if raw is None:
            return None
        try:
            return BaselineEntry.model_validate(raw)
        except ValidationError:
            return None

    def has(self, problem: Problem, mode: str = EAGER) -> bool:
        return self.entry(problem.level, problem.filename, mode) is not None

    def failure(self, problem: Problem, mode: str = EAGER) -> str | None:
        per_file = ((self.data.get("failures") or {}).get(level_key(problem.level)) or {}).get(problem.filename) or {}
        return per_file.get(mode)

    def count(self, mode: str | None = None) -> int:
        modes = [mode] if mode else [EAGER, *(self.data.get("modes") or {})]
        n = 0
        for m in modes:
            block = self._mode_block(m)
            n += sum(len(v) for k, v in block.items() if LEVEL_KEY.match(k) and isinstance(v, dict))
        return n

    # -- writing ------------------------------------------------------------------------------
    def check_environment(self, env: dict[str, Any]) -> None:
        """Refuse a measurement from another GPU type or timing protocol than the file's."""
        if self.force:
            return
        file_gpu = (gpu_family(self.environment.get("gpu_name")) or gpu_family(self._hardware_in_entries())
                    or self.gpu)
        new_gpu = gpu_family(env.get("gpu_name")) or ("cpu" if env.get("device") == "cpu" else None)
        if file_gpu and new_gpu and file_gpu != new_gpu:
            raise BaselineError(f"measured on {new_gpu}, but {self.path} holds {file_gpu} times; not written "
                                "(measure into another file, or force)")
        protocol = env.get("timing_protocol")
        if protocol and self.count() and self.environment.get("timing_protocol") not in (None, protocol):
            raise BaselineError(f"measured with timing protocol {protocol!r}, but {self.path} holds "
                                f"{self.environment.get('timing_protocol')!r} times; not written")

    def _merge_environment(self, env: dict[str, Any], precision: str | None) -> None:
        old = self.environment
        new = {k: env.get(k) for k in _ENV_KEYS if env.get(k) is not None}
        if not new.get("gpu_name") and env.get("device") == "cpu":
            new["gpu_name"] = "cpu"
        new.setdefault("timing_protocol", TIMING_PROTOCOL_VERSION)
        new["date"] = _today()
        if precision:
            new["precision"] = precision
        changed = [f"{k} {old[k]} -> {new[k]}" for k in _SOFTWARE_KEYS
                   if old.get(k) and new.get(k) and old[k] != new[k]]
        if changed:
            note = f"{self.path}: software changed between measurements ({', '.join(changed)})"
            if note not in self.notes:
                self.notes.append(note)
                log.warning("%s", note)
        merged = {**old, **new}
        self.data["environment"] = {k: merged[k] for k in [*_ENV_KEYS, *sorted(set(merged) - set(_ENV_KEYS))]
                                    if k in merged}

    def put(self, problem: Problem, mode: str, entry: BaselineEntry, environment: dict[str, Any] | None = None,
            precision: str | None = None, save: bool = True) -> None:
        """Record a time (clearing an earlier failure for it) and write the file."""
        env = environment if environment is not None else (entry.environment or {})
        if env:
            self.check_environment(env)
        self._record_problem(problem)
        block = self._mode_block(mode, create=True).setdefault(level_key(problem.level), {})
        block[problem.filename] = entry.model_dump(mode="json", exclude_none=True)
        self._clear_failure(problem, mode)
        if env:
            self._merge_environment(env, precision)
        if save:
            self.save()

    def _record_problem(self, problem: Problem) -> None:
        """Note the problem's set and hash; refuse to put two problem sets' times in one file."""
        name, revision = set_of_problem(problem)
        block = self.data.setdefault("problem_set", {"name": name, "revision": revision, "hashes": {}})
        if (block.get("name"), block.get("revision")) != (name, revision) and not self.force:
            raise BaselineError(
                f"{self.path} holds times for problem set {block.get('name')}@{block.get('revision')}; "
                f"{problem.filename} is from {name}@{revision}: use another file (or {self.restart_flag})")
        block.setdefault("hashes", {})[ref_of(problem)] = problem.hash

    def put_failure(self, problem: Problem, mode: str, error: str, save: bool = True) -> None:
        failures = self.data.setdefault("failures", {})
        failures.setdefault(level_key(problem.level), {}).setdefault(problem.filename, {})[mode] = one_line(error)
        if save:
            self.save()

    def _clear_failure(self, problem: Problem, mode: str) -> None:
        self._clear_failure_at(level_key(problem.level), problem.filename, mode)

    def _clear_failure_at(self, lkey: str, filename: str, mode: str) -> None:
        failures = self.data.get("failures") or {}
        level = failures.get(lkey) or {}
        per_file = level.get(filename) or {}
        if mode in per_file:
            del per_file[mode]
            if not per_file:
                del level[filename]
            if not level:
                del failures[lkey]
            if not failures:
                del self.data["failures"]

    def merge_from(self, other: BaselineFile, modes: list[str] | None = None, save: bool = True) -> int:
        """Take in the times another file of the same GPU, protocol, precision and problem set measured.

        Why: one host's GPUs can measure disjoint levels of one file at once, each into its own copy;
        joining them must keep every guarantee a single writer gives. A time both files hold stays this
        file's (the first measurement is kept), and a problem whose hash differs between the two is refused.
        Returns how many times were added.
        """
        env, theirs = self.environment, other.environment
        missing = [what for what, value in (("a GPU", gpu_family(theirs.get("gpu_name")) or other._hardware_in_entries()),
                                            ("a timing protocol", theirs.get("timing_protocol")),
                                            ("a problem set", (other.data.get("problem_set") or {}).get("name")))
                   if not value]
        if missing and other.count():
            raise BaselineError(f"{other.path} does not say {' or '.join(missing)} it was measured with; not merged")
        for key in ("timing_protocol", "precision"):
            if env.get(key) and theirs.get(key) and env[key] != theirs[key]:
                raise BaselineError(f"{other.path} was measured with {key} {theirs[key]!r}, {self.path} with "
                                    f"{env[key]!r}; not merged")
        mine_gpu = gpu_family(env.get("gpu_name")) or gpu_family(self._hardware_in_entries())
        their_gpu = gpu_family(theirs.get("gpu_name")) or gpu_family(other._hardware_in_entries())
        if mine_gpu and their_gpu and mine_gpu != their_gpu:
            raise BaselineError(f"{other.path} holds {their_gpu} times, {self.path} {mine_gpu} times; not merged")
        ps_mine, ps_theirs = self.data.get("problem_set") or {}, other.data.get("problem_set") or {}
        if ps_mine and ps_theirs:
            if (ps_mine.get("name"), ps_mine.get("revision")) != (ps_theirs.get("name"), ps_theirs.get("revision")):
                raise BaselineError(f"{other.path} holds problem set {ps_theirs.get('name')}@"
                                    f"{ps_theirs.get('revision')}, {self.path} {ps_mine.get('name')}@"
                                    f"{ps_mine.get('revision')}; not merged")
            hashes = ps_mine.get("hashes") or {}
            clash = [ref for ref, h in (ps_theirs.get("hashes") or {}).items() if ref in hashes and hashes[ref] != h]
            if clash:
                raise BaselineError(f"{other.path} and {self.path} hold different versions of {clash[0]}; not merged")
        # Everything is checked before anything changes, so a refused merge leaves this file as it was.
        times: list[tuple[str, str, str, dict]] = []  # mode, level key, file name, entry
        for mode in [EAGER, *(other.data.get("modes") or {})]:
            if modes is not None and mode not in modes:
                continue
            for lkey, problems in other._mode_block(mode).items():
                if not (LEVEL_KEY.match(lkey) and isinstance(problems, dict)):
                    continue
                for filename, raw in problems.items():
                    try:
                        BaselineEntry.model_validate(raw)
                    except ValidationError as e:
                        raise BaselineError(f"{other.path}: {lkey}/{filename} ({mode}) is not a valid entry: "
                                            f"{one_line(str(e))}") from None
                    times.append((mode, lkey, filename, raw))
        their_failures = other.data.get("failures") or {}
        if not isinstance(their_failures, dict) or not all(
                isinstance(per_file, dict) and all(isinstance(per_mode, dict) for per_mode in per_file.values())
                for per_file in their_failures.values()):
            raise BaselineError(f"{other.path}: its failures block is malformed; not merged")
        added = 0
        for mode, lkey, filename, raw in times:
            block = self._mode_block(mode, create=True).setdefault(lkey, {})
            if filename not in block:  # a time both files hold stays this file's
                block[filename] = raw
                added += 1
                self._clear_failure_at(lkey, filename, mode)
        for lkey, per_file in their_failures.items():
            for filename, per_mode in per_file.items():
                for mode, error in per_mode.items():
                    if (modes is None or mode in modes) and \
                            filename not in (self._mode_block(mode).get(lkey) or {}):
                        # a failure both files record stays this file's, as a time does
                        self.data.setdefault("failures", {}).setdefault(lkey, {}).setdefault(filename, {}) \
                            .setdefault(mode, error)
        if ps_theirs:
            block = self.data.setdefault("problem_set", {k: v for k, v in ps_theirs.items() if k != "hashes"})
            block.setdefault("hashes", {}).update(ps_theirs.get("hashes") or {})
        if theirs:
            dates = [d for d in (env.get("date"), theirs.get("date")) if d]
            self._merge_environment(theirs, theirs.get("precision"))
            if dates:  # the newest measurement's date, not the day of the merge
                self.data["environment"]["date"] = max(dates)
        if save:
            self.save()
        return added

    def to_dict(self) -> dict[str, Any]:
        """Levels in numeric order, problems by id, then modes, failures and the environment."""
        top = {k: v for k, v in self.data.items() if k not in ("modes", "failures", "environment", "problem_set")}
        out = sorted_levels(top)
        if self.data.get("modes"):
            out["modes"] = {m: sorted_levels(self.data["modes"][m]) for m in sorted(self.data["modes"], key=mode_order)}
        if self.data.get("failures"):
            out["failures"] = sorted_levels(self.data["failures"])
        if "environment" in self.data:
            out["environment"] = self.data["environment"]
        if "problem_set" in self.data:
            ps = self.data["problem_set"]
            out["problem_set"] = {**ps, "hashes": dict(sorted((ps.get("hashes") or {}).items()))}
        return out

    def save(self) -> None:
        atomic_write_json(self.path, self.to_dict())
