"""The smallest site's plan and rendered releases, to break one thing at a time and run `fabctl check` on it."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.config import SiteConfig, parse_site
from fabctl.check import Finding, Report, ValuesCheck, check
from fabctl.helm import ChartPackages, MissingChart, RenderedRelease, render_releases
from fabctl.render import PROJECT_DIR, Plan
from helpers import render_small
from small_site import small_site


@dataclass
class Deploy:
    """A plan, the site config it came from and what its releases render to: the check's whole input."""

    plan: Plan
    site: SiteConfig
    releases: list[RenderedRelease]
    missing: list[MissingChart]

    def copy(self) -> Deploy:
        return copy.deepcopy(self)

    def report(self, values: ValuesCheck | None = None) -> Report:
        return check(self.plan, self.site, self.releases, self.missing, values)

    def lines(self, rule: str | None = None) -> list[str]:
        """The check's finding lines (of one rule)."""
        return [f.line() for f in self.report().findings if rule is None or f.rule == rule]

    def findings(self, rule: str) -> list[Finding]:
        return [f for f in self.report().findings if f.rule == rule]

    def resource(self, name: str) -> dict[str, Any]:
        (record,) = [r for r in self.plan.resources if r["name"] == name]
        return record

    def release(self, chart: str, cluster: str) -> RenderedRelease:
        (found,) = [r for r in self.releases if r.chart.name == chart and r.cluster == cluster]
        return found

    def drop_dependency(self, name: str, dependency: str) -> None:
        """Resource `name` no longer waits for resource `dependency` (directly)."""
        record, urn = self.resource(name), self.resource(dependency)["urn"]
        assert urn in record["dependencies"], f"{name} does not depend on {dependency}"
        record["dependencies"] = [d for d in record["dependencies"] if d != urn]
        record["property_dependencies"] = {k: [u for u in v if u != urn] for k, v in record.get("property_dependencies", {}).items()}

    def add_dependency(self, name: str, dependency: str) -> None:
        self.resource(name)["dependencies"].append(self.resource(dependency)["urn"])


def deploy_of(raw: dict[str, Any], chart_dir: Path, helm: Path, secrets: dict[str, Any] | None = None) -> Deploy:
    """A site object's deploy: its render (shared with the other tests of the session, so copied) and its releases;
    `secrets` are the secret config keys beside it (`small_site.SERVING_REPO_TOKEN`)."""
    plan = copy.deepcopy(render_small(raw, secrets=secrets))
    releases, missing = render_releases(plan, ChartPackages(chart_dir), helm, PROJECT_DIR)
    return Deploy(plan, parse_site(raw), releases, missing)


_SMALL: list[Deploy] = []


def small_deploy(chart_dir: Path, helm: Path) -> Deploy:
    """A fresh copy of the smallest site's deploy (rendered once per session)."""
    if not _SMALL:
        _SMALL.append(deploy_of(small_site(), chart_dir, helm))
    return _SMALL[0].copy()
