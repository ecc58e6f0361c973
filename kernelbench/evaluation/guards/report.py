"""The guard report: findings with a verdict, as JSON (pydantic) or a short text form."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, computed_field

from kernelbench.evaluation.guards.rules import SEVERITY_ORDER, severity_of
from kernelbench.results import GuardFinding


class GuardReport(BaseModel):
    """What the static guard found in one candidate source.

    ``passed`` is False as soon as one finding has severity ``error``; warnings never fail a
    candidate on their own (the runtime guards decide those cases).
    """

    model_config = ConfigDict(frozen=True)

    backend: str
    findings: list[GuardFinding] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    @property
    def errors(self) -> list[GuardFinding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[GuardFinding]:
        return [f for f in self.findings if f.severity == "warning"]

    def rules(self, severity: str | None = None) -> set[str]:
        return {f.rule for f in self.findings if severity is None or f.severity == severity}

    def summary(self) -> str:
        """One line for tables and PR comments."""
        verdict = "passed" if self.passed else "FAILED"
        return (f"{verdict} (backend {self.backend}: {len(self.errors)} errors, "
                f"{len(self.warnings)} warnings, {len(self.findings) - len(self.errors) - len(self.warnings)} info)")

    def to_text(self) -> str:
        """One line per finding: ``line N: [severity] rule: message``."""
        return "\n".join(format_finding(f) for f in self.findings)

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)

    @classmethod
    def from_json(cls, text: str) -> GuardReport:
        return cls.model_validate_json(text)


def format_finding(f: GuardFinding) -> str:
    where = f"line {f.line}" if f.line is not None else "line -"
    return f"{where}: [{f.severity}] {f.rule}: {f.message}"


class FindingSink:
    """Collects findings, one per (rule, line), in a stable order."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, int | None], GuardFinding] = {}

    def add(self, rule: str, message: str, line: int | None) -> None:
        key = (rule, line)
        if key not in self._by_key:
            self._by_key[key] = GuardFinding(rule=rule, severity=severity_of(rule), message=message,
                                             line=line, origin="static")

    def has(self, rule: str) -> bool:
        return any(k[0] == rule for k in self._by_key)

    def sorted(self) -> list[GuardFinding]:
        return sorted(self._by_key.values(),
                      key=lambda f: (f.line if f.line is not None else 0, SEVERITY_ORDER[f.severity], f.rule))
