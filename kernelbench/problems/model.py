"""Problem and ProblemSet: the contract every problem source produces."""

from __future__ import annotations

import hashlib
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from kernelbench.errors import ProblemNotFoundError

LEVELS = (1, 2, 3, 4)


def _without_reduced_size(code: str) -> str:
    """The code minus its top-level ``CPU_SIZE = {...}`` declaration.

    Declaring a reduced CPU size does not change what the problem computes at full size, so it must
    not change the problem's identity (baselines and leaderboard results are keyed by this hash).
    """
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    lines = code.splitlines(keepends=True)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "CPU_SIZE" and node.end_lineno is not None):
            del lines[node.lineno - 1:node.end_lineno]
            return "".join(lines)
    return code


_TRIPLE_QUOTED = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')
_COMMENT_OR_SPACE = re.compile(r"#.*$|\s+", re.MULTILINE)


def kernelbench_code_hash(code: str) -> str:
    """KernelBench's problem hash (``get_code_hash`` upstream): MD5 of the code without triple-quoted
    strings, ``#`` comments and whitespace. Same input, same digest as KernelBench's own tools."""
    stripped = _TRIPLE_QUOTED.sub("", code)
    stripped = _COMMENT_OR_SPACE.sub("", stripped)
    return hashlib.md5(stripped.encode("utf-8")).hexdigest()


def normalized_code_hash(code: str) -> str:
    """A problem's identity: KernelBench's hash of its code, less a ``CPU_SIZE`` declaration.

    One value everywhere (results, baselines, run directories, bundles, the site), and for a problem
    without ``CPU_SIZE`` (every official one) exactly the hash KernelBench computes, so a hash written
    by either project can be checked against the other's problems. Re-documenting or re-formatting a
    problem keeps it; changing what it computes (a size, an operation) does not.
    """
    return kernelbench_code_hash(_without_reduced_size(code))


def legacy_code_hash(code: str) -> str:
    """The hash results recorded before problems took KernelBench's (SHA-256 of the code's tokens,
    string literals and docstrings kept): still recognised, so older results are not taken for stale."""
    code = _without_reduced_size(code)
    parts: list[str] = []
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type not in skip:
                parts.append(tok.string)
        normalized = " ".join(parts)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        no_comments = re.sub(r"#[^\n]*", "", code)
        normalized = " ".join(no_comments.split())
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def problem_key(level: int, problem_id: int) -> str:
    """The key that matches results, baselines and submissions to a problem (never position)."""
    return f"level_{level}_problem_{problem_id}"


@dataclass(frozen=True)
class Problem:
    """One KernelBench problem: a ``Model``, ``get_inputs`` and ``get_init_inputs`` in source form."""

    level: int
    problem_id: int
    name: str
    code: str
    source: str = "builtin"
    #: Extra packages the problem imports beyond torch (e.g. ``transformers`` for level 4).
    requirements: tuple[str, ...] = field(default=())
    #: Set on a problem shrunk to its ``CPU_SIZE`` (see :meth:`at_reduced_size`): the globals rebound.
    reduced_size: tuple[tuple[str, int], ...] | None = None

    @cached_property
    def hash(self) -> str:
        """KernelBench's hash of the code (see :func:`normalized_code_hash`)."""
        return normalized_code_hash(self.code)

    def matches_hash(self, recorded: str) -> bool:
        """Whether a hash an artefact recorded is this problem's, in today's form or the older SHA-256 one."""
        if len(recorded) == 64:
            return recorded == legacy_code_hash(self.code)
        return recorded == self.hash

    @property
    def key(self) -> str:
        return problem_key(self.level, self.problem_id)

    @property
    def filename(self) -> str:
        """File name as KernelBench writes it; baseline files are keyed by it."""
        return f"{self.name}.py"

    def at_reduced_size(self) -> Problem:
        """This problem at its declared ``CPU_SIZE``, for affordable correctness checks on the CPU.

        Its code (and so its hash) differs from the full-size problem, and results carry
        ``reduced_size``: they say so everywhere and are refused by scoring. Raises ValueError if the
        problem declares no reduced size.
        """
        from dataclasses import replace

        from kernelbench.problems.contract import apply_reduced_size, reduced_size

        if self.reduced_size is not None:
            return self
        sizes = reduced_size(self.code)
        if sizes is None:
            raise ValueError(f"problem {self.name} declares no CPU_SIZE (no reduced size)")
        return replace(self, code=apply_reduced_size(self.code, sizes), reduced_size=tuple(sizes.items()))

    def to_json(self) -> dict:
        """The problem as JSON-able data (another process rebuilds it with :meth:`from_json`); the hash is
        included so that the receiving side can check the code arrived unchanged."""
        return {"level": self.level, "problem_id": self.problem_id, "name": self.name, "code": self.code,
                "source": self.source, "requirements": list(self.requirements), "hash": self.hash}

    @classmethod
    def from_json(cls, data: dict) -> Problem:
        """The problem :meth:`to_json` wrote. Raises KeyError, TypeError or ValueError on malformed data."""
        return cls(level=int(data["level"]), problem_id=int(data["problem_id"]), name=str(data["name"]),
                   code=str(data["code"]), source=str(data.get("source", "")),
                   requirements=tuple(data.get("requirements") or ()))

    def __repr__(self) -> str:  # the code is long; keep reprs readable
        return f"Problem(level={self.level}, problem_id={self.problem_id}, name={self.name!r}, source={self.source!r})"


def at_reduced_sizes(problems: Iterable[Problem]) -> list[Problem]:
    """Those of ``problems`` that declare a ``CPU_SIZE``, each at it (for checking the plumbing on a CPU);
    the others are left out."""
    from kernelbench.problems.contract import reduced_size

    return [p.at_reduced_size() for p in problems if p.reduced_size is not None or reduced_size(p.code) is not None]


def parse_id_spec(spec: str) -> list[int]:
    """Parse ``"1,3,5-8"`` into ``[1, 3, 5, 6, 7, 8]``; raise ValueError with the bad part named."""
    ids: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise ValueError(f"empty id range {part!r}")
            ids.extend(range(lo, hi + 1))
        elif part.isdigit():
            ids.append(int(part))
        else:
            raise ValueError(f"bad problem id {part!r} (expected e.g. 3 or 1-10)")
    return ids


class ProblemSet:
    """An ordered, immutable collection of problems, looked up by (level, id) or by name."""

    def __init__(self, problems: Iterable[Problem], source: str = ""):
        ordered = sorted(problems, key=lambda p: (p.level, p.problem_id))
        self._problems: tuple[Problem, ...] = tuple(ordered)
        self._by_key: dict[tuple[int, int], Problem] = {}
        for p in self._problems:
            if (p.level, p.problem_id) in self._by_key:
                raise ValueError(f"duplicate problem level {p.level} id {p.problem_id} in {source or 'problem set'}")
            self._by_key[(p.level, p.problem_id)] = p
        self.source = source

    def __iter__(self) -> Iterator[Problem]:
        return iter(self._problems)

    def __len__(self) -> int:
        return len(self._problems)

    def __bool__(self) -> bool:
        return bool(self._problems)

    def __repr__(self) -> str:
        return f"ProblemSet({len(self)} problems, levels={self.levels()}, source={self.source!r})"

    def levels(self) -> list[int]:
        return sorted({p.level for p in self._problems})

    def ids(self, level: int) -> list[int]:
        return [p.problem_id for p in self._problems if p.level == level]

    def count_by_level(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for p in self._problems:
            out[p.level] = out.get(p.level, 0) + 1
        return out

    def get(self, level: int, problem_id: int) -> Problem:
        try:
            return self._by_key[(level, problem_id)]
        except KeyError:
            if level not in self.levels():
                raise ProblemNotFoundError(
                    f"level {level} has no problems in {self.source or 'this problem set'} "
                    f"(levels available: {', '.join(map(str, self.levels())) or 'none'})"
                ) from None
            ids = self.ids(level)
            raise ProblemNotFoundError(
                f"no problem with id {problem_id} in level {level} of {self.source or 'this problem set'} "
                f"(ids {_describe_ids(ids)})"
            ) from None

    def by_name(self, name: str, level: int | None = None) -> Problem:
        """Look up by file stem (``19_ReLU``) or by name without the id prefix (``ReLU``)."""
        stem = name[:-3] if name.endswith(".py") else name
        matches = [
            p for p in self._problems
            if (level is None or p.level == level)
            and (p.name == stem or p.name.split("_", 1)[-1] == stem)
        ]
        if not matches:
            raise ProblemNotFoundError(f"no problem named {name!r} in {self.source or 'this problem set'}")
        if len(matches) > 1:
            where = ", ".join(f"level {p.level} id {p.problem_id}" for p in matches)
            raise ProblemNotFoundError(f"problem name {name!r} is ambiguous ({where}); give the level too")
        return matches[0]

    def select(
        self,
        levels: Iterable[int] | None = None,
        ids: Iterable[int] | None = None,
        id_range: tuple[int, int] | None = None,
    ) -> ProblemSet:
        """A subset; an unknown level or an id that no selected level has is an error, not an empty set."""
        chosen = list(self._problems)
        if levels is not None:
            levels = list(levels)
            for lv in levels:
                if lv not in self.levels():
                    raise ProblemNotFoundError(
                        f"level {lv} has no problems in {self.source or 'this problem set'} "
                        f"(levels available: {', '.join(map(str, self.levels())) or 'none'})"
                    )
            chosen = [p for p in chosen if p.level in levels]
        if ids is not None:
            wanted = list(ids)
            present = {p.problem_id for p in chosen}
            missing = [i for i in wanted if i not in present]
            if missing:
                lv = ", ".join(str(v) for v in sorted({p.level for p in chosen}))
                raise ProblemNotFoundError(
                    f"problem id(s) {', '.join(map(str, missing))} not found in level {lv} of "
                    f"{self.source or 'this problem set'}"
                )
            chosen = [p for p in chosen if p.problem_id in set(wanted)]
        if id_range is not None:
            lo, hi = id_range
            chosen = [p for p in chosen if lo <= p.problem_id <= hi]
            if not chosen:
                raise ProblemNotFoundError(f"no problems with ids {lo}-{hi} in {self.source or 'this problem set'}")
        return ProblemSet(chosen, source=self.source)


def _describe_ids(ids: list[int]) -> str:
    if not ids:
        return "none"
    if ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}"
    return ", ".join(map(str, ids))
