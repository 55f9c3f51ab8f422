"""Each roadmap phase's completion check (docs/roadmap.md) as acceptance jobs, built from the site's config
(docs/acceptance.md says what each criterion proves, its bound and what it needs on the site).

`build(site, phase)` is every criterion of the phase as its builder gives it: a `Criterion` to run, `NotApplicable(id,
reason)` when there is nothing to check, or `(id, reason)` when it cannot run on the site, which fabctl/verify/gates.py
turns into INCOMPLETE, WAIVED or SKIPPED as the phase requires it; `criteria(site, phase)` are those that run and
`not_applicable(site, phase)` the others with the reason. Every object is labelled `fab.internal/verify: <criterion id>` and lives in the acceptance namespace
(`acceptance.namespace`) unless it must use a team's Secret, which only that team's namespace holds (then it is in the
team's namespace, labelled the same, and deleted with its step). Pods are Pod Security restricted (non-root, read-only
root filesystem with emptyDir scratch, no capabilities, RuntimeDefault seccomp, requests and limits) except the MPI
pods of the NCCL check (`phase_01_nccl.MPI_EXCEPTION`). Jobs report figures as `FAB-RESULT key=value` lines
(fabctl/verify/probe.py).

Each phase's criteria are in its own module, `phase_0N.py`, whose `phase_0N(site)` lists them in report order (phase
01's NCCL check, MPI over built-in Jobs beside a storage load, is in `phase_01_nccl.py`; its storage baseline in `phase_01_storage.py`; phase 02's serving SLO in `phase_02_slo.py`); `blocks.py` holds what they share:
the `Site` they read, and the objects, steps and verdict helpers (`_probe_step`, `_team_probe_step`, `_job`,
`_kubectl_pod`, `_account`, `_figure`, `_ran`...). `PHASE_BUILDERS` below maps each phase to its list.

To add a criterion to a phase: write its builder in `phase_0N.py` (a function of the `Site` returning a `Criterion` of
that phase, `(id, reason)` when it cannot run on the site, or `NotApplicable(id, reason)` when there is nothing to check),
call it where it belongs in `phase_0N(site)`, whose order is the report's, and give its family a row in
fabctl/verify/gates.py REQUIREMENTS (required on every site, or where the site configures what it checks; then
`python -m fabctl.roadmap_table`). A new phase is a new module and a line in `PHASE_BUILDERS` and `PHASES`.
"""

from __future__ import annotations

from collections.abc import Callable

from components.config import SiteConfig
from fabctl.verify.criteria.blocks import Site
from fabctl.verify.criteria.phase_01 import phase_01
from fabctl.verify.criteria.phase_02 import phase_02
from fabctl.verify.criteria.phase_03 import phase_03
from fabctl.verify.criteria.phase_04 import phase_04
from fabctl.verify.criteria.phase_05 import phase_05
from fabctl.verify.model import Built, Criterion, NotApplicable

PHASES = (1, 2, 3, 4, 5)


def build(site: SiteConfig, phase: int) -> list[Built]:
    """Every criterion of `phase` (1-5) on the site as its builder gives it, in report order."""
    return _build(site, phase)


def criteria(site: SiteConfig, phase: int) -> list[Criterion]:
    """The acceptance criteria of `phase` (1-5) that run on the site, in report order."""
    return [c for c in _build(site, phase) if isinstance(c, Criterion)]


def not_applicable(site: SiteConfig, phase: int) -> list[tuple[str, str]]:
    """(criterion id, why it does not run on the site) for the phase's criteria left out of `criteria`."""
    return [(c.id, c.reason) if isinstance(c, NotApplicable) else c for c in _build(site, phase) if not isinstance(c, Criterion)]


def _build(site: SiteConfig, phase: int) -> list[Built]:
    if phase not in PHASES:
        raise ValueError(f"phase {phase} is not a roadmap phase; give one of {', '.join(map(str, PHASES))}")
    return PHASE_BUILDERS[phase](Site(site))


PHASE_BUILDERS: dict[int, Callable[[Site], list[Built]]] = {
    1: phase_01, 2: phase_02, 3: phase_03, 4: phase_04, 5: phase_05,
}
