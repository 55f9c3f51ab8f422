"""What `fabctl check` reports: one finding per thing that stops a deploy, naming the object, the rule and the fix."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from fabctl.check.placed import Placed

Severity = Literal["error", "note"]


@dataclass(frozen=True)
class Finding:
    rule: str
    """A rule id of `components.config.CHECK_RULES`, such as `order.crd`."""
    cluster: str
    """Provider name of the cluster (`site-a-gpu`)."""
    subject: str
    """`Kind namespace/name` (or `Kind name`): the object the finding is about, as `check.accept` names it."""
    origin: str
    """The Pulumi resource that applies the object (logical name, and the release for a chart's object)."""
    problem: str
    fix: str
    severity: Severity = "error"
    accepted: str | None = None
    """The reason the stack's config gives for accepting it (`check.accept`); an accepted finding is no error."""

    @classmethod
    def of(cls, rule: str, placed: Placed, problem: str, fix: str, severity: Severity = "error") -> Finding:
        return cls(rule, placed.cluster, placed.subject, placed.origin, problem, fix, severity)

    @property
    def blocking(self) -> bool:
        return self.severity == "error" and self.accepted is None

    def accept(self, reason: str) -> Finding:
        return replace(self, accepted=reason)

    def line(self) -> str:
        level = "accepted" if self.accepted is not None else self.severity
        text = f"{level} [{self.rule}] {self.cluster} {self.subject} ({self.origin}): {self.problem}"
        if self.accepted is not None:
            return f"{text}; accepted: {self.accepted}"
        return f"{text}. Fix: {self.fix}" if self.fix else text
