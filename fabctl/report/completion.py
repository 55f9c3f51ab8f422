"""The plan report's completion checks: per roadmap phase, which criteria `fabctl verify` will run on the site, which
are waived and why, and which would leave the phase INCOMPLETE (fabctl/verify/gates.py, docs/roadmap.md)."""

from __future__ import annotations

from dataclasses import dataclass

from components.config import SiteConfig
from components.config.schema.roadmap import PHASES as PHASE_NAMES
from fabctl.verify.criteria import PHASES, build
from fabctl.verify.gates import RUN, plan
from fabctl.verify.report import INCOMPLETE, WAIVED

WILL_RUN, NOT_RUN = "will run", "not run"


@dataclass(frozen=True)
class CompletionRow:
    id: str
    required: bool
    status: str
    """`will run`, `waived`, `incomplete` or `skipped`."""
    why: str
    """Why it does not run (the builder's reason); for a waived one, the waiver's reason first."""


@dataclass(frozen=True)
class PhaseCompletion:
    phase: int
    name: str
    rows: list[CompletionRow]
    waiver_errors: list[str]
    """Waivers `fabctl verify` would refuse (exit 2): of a criterion that runs, that the phase does not require, or none."""

    @property
    def incomplete(self) -> list[CompletionRow]:
        return [r for r in self.rows if r.status == INCOMPLETE]

    @property
    def waived(self) -> list[CompletionRow]:
        return [r for r in self.rows if r.status == WAIVED]

    @property
    def state(self) -> str:
        """What `fabctl verify --phase N` would end in before measuring anything: `refused` (a waiver it refuses),
        `INCOMPLETE`, or `ready` (every required criterion runs or is waived; the run decides)."""
        if self.waiver_errors:
            return "refused"
        return "INCOMPLETE" if self.incomplete else "ready"


def completion(site: SiteConfig) -> list[PhaseCompletion]:
    """Every phase's completion check on the site, as `fabctl verify` would hold it before running anything."""
    phases = []
    for phase in PHASES:
        checked = plan(site, phase, build(site, phase))
        rows = [CompletionRow(p.id, p.required, WILL_RUN if p.status == RUN else p.status,
                              f"{p.waiver} (not run: {p.reason})" if p.status == WAIVED else p.reason)
                for p in checked.planned]
        phases.append(PhaseCompletion(phase, PHASE_NAMES[phase], rows, checked.waiver_errors))
    return phases
