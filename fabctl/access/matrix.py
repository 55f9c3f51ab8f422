"""`answer(plan, seat)`: every area's accesses of a seat, in the matrix's order (model.AREAS)."""

from __future__ import annotations

from pathlib import Path

from components.config import SiteConfig
from fabctl.access import catalog, ci, gateway, network, rbac, s3
from fabctl.access.model import AREAS, Access, Principal
from fabctl.access.principal import resolve
from fabctl.render import PROJECT_DIR, Plan

AREA_MODULES = (rbac, network, s3, catalog, gateway, ci)
"""The area modules evaluated, each with `accesses(plan, principal) -> list[Access]`, one per model.AREAS (a test keeps
them equal)."""
NOT_SEEN = (
    *rbac.NOT_SEEN,
    "what runs inside the engines (Airflow roles, Trino or Spark Connect sessions, notebooks' own credentials)",
    "the repository's settings (default token permissions, environment reviewers) and the secrets' values",
)
"""What no area can see: the footer of every answer."""


def evaluate(plan: Plan, principal: Principal) -> list[Access]:
    """Every area module's accesses of a resolved principal, sorted by area (AREAS), target and scope."""
    found = [access for module in AREA_MODULES for access in module.accesses(plan, principal)]
    return sorted(found, key=lambda a: (AREAS.index(a.area), a.target, a.scope, a.via, a.allowed))


def answer(plan: Plan, seat: str, site: SiteConfig | None = None, project_dir: Path = PROJECT_DIR) -> list[Access]:
    """What a seat (`team:T`, `vendor:V`, `user:U`, `pr-author`; principal.SEAT_FORMS) can do on the plan's stack."""
    return evaluate(plan, resolve(plan, seat, site, project_dir))
