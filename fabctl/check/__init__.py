"""`fabctl check`: prove offline that a plan can deploy on an empty cluster, in order (docs/deploy-check.md).

Schemas say each object is well-formed; this says the plan can be applied. Over the whole picture (the
program's objects and every object its Helm releases install) and the Pulumi dependency graph, it walks the
plan as the engine would on empty clusters: CRDs and namespaces before what needs them, every name a pod or
resource uses created by something, no wait that cannot end, every pod on a declared node, every image and
chart pinned, every chart value read. Each finding is an error unless the stack's `check.accept` accepts it
with a reason.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from components.config import CHECK_RULES, SiteConfig
from components.versions import CHARTS
from fabctl.check.findings import Finding
from fabctl.check.mirror import mirror_findings
from fabctl.check.order import crd_findings, namespace_findings, release_namespace_findings
from fabctl.check.picture import Picture
from fabctl.check.pins import chart_findings, image_findings
from fabctl.check.readiness import hook_findings, load_balancer_findings
from fabctl.check.references import reference_findings
from fabctl.check.scheduling import scheduling_findings
from fabctl.check.settings import settings_findings
from fabctl.check.trust import trust_findings
from fabctl.check.values import ValuesCheck, chart_defaults, values_findings
from fabctl.helm import ChartRef, ChartSource, MissingChart, RenderedRelease, crd_folder_names, helm_version
from fabctl.progress import Phases
from fabctl.render import Plan

__all__ = ["CHECK_RULES", "Finding", "Report", "ValuesCheck", "check"]


@dataclass
class Report:
    stack: str
    findings: list[Finding]
    releases: list[RenderedRelease]
    missing: list[MissingChart]
    objects: int
    """Kubernetes objects in the picture (the program's and the rendered releases')."""
    unmatched: list[str] = field(default_factory=list)
    """`check.accept` entries that match no finding (lines to print)."""
    seconds: float = 0.0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]

    @property
    def total_releases(self) -> int:
        return len(self.releases) + len(self.missing)

    @property
    def unchecked(self) -> int:
        """Releases whose objects the check could not see: no chart package (or no Helm), or Helm refused to render them."""
        return len(self.missing) + sum(1 for r in self.releases if r.error)

    def unchecked_text(self) -> str:
        """What the summary says beside the errors, in the same words: never a bare "0 errors" while releases went unseen."""
        if self.unchecked:
            return f"{self.unchecked} {'release' if self.unchecked == 1 else 'releases'} NOT checked"
        return f"all {self.total_releases} releases checked" if self.total_releases else "no releases"

    def summary(self) -> str:
        counts = Counter("accepted" if f.accepted is not None else f.severity for f in self.findings)
        rendered = sum(1 for r in self.releases if not r.error)
        return (f"check {self.stack}: {counts['error']} errors, {self.unchecked_text()}, {counts['accepted']} accepted, "
                f"{counts['note']} notes; {rendered} of {self.total_releases} releases rendered; {self.objects} objects checked "
                f"in {self.seconds:.1f} s")


def check(plan: Plan, site: SiteConfig, releases: list[RenderedRelease], missing: list[MissingChart],
          values: ValuesCheck | None = None, phases: Phases | None = None) -> Report:
    """Every finding of the plan and its rendered releases, with the site's acceptances applied.
    `values` re-renders releases to find the chart values they set and their charts do not read (left out: skipped).
    `phases` times (and on a terminal shows) the rules, then the chart-value trials release by release."""
    phases = phases or Phases()
    started = time.perf_counter()
    with phases.phase("rules"):
        picture = Picture(plan, site, releases, missing)
        findings = [
            *crd_findings(picture), *namespace_findings(picture), *release_namespace_findings(picture),
            *reference_findings(picture), *load_balancer_findings(picture),
            *hook_findings(picture), *scheduling_findings(picture), *image_findings(picture), *chart_findings(picture),
            *mirror_findings(picture),
            *settings_findings(picture),
            *trust_findings(picture),
        ]
    if values is not None:
        tried = [r for r in releases if not r.error and r.package is not None]
        with phases.phase("chart values", total=len(tried)) as advance:
            findings += values_findings(picture, values, advance)
    accepted = {(a.rule, site.cluster_name(a.cluster), a.object): a.reason for a in site.check.accept}
    used = set()
    for i, finding in enumerate(findings):
        key = (finding.rule, finding.cluster, finding.subject)
        if key in accepted:
            findings[i] = finding.accept(accepted[key])
            used.add(key)
    unmatched = [f"check.accept[{i}] ({a.rule} {a.cluster} {a.object}) matches no finding; remove it"
                 for i, a in enumerate(site.check.accept) if (a.rule, site.cluster_name(a.cluster), a.object) not in used]
    return Report(plan.stack, list(dict.fromkeys(findings)), releases, missing, len(picture.placed), unmatched,
                  time.perf_counter() - started)


def prepare(charts: ChartSource, helm: Path) -> None:
    """Do ahead what the check will need of the chart packages at hand (the mirror folder's and the cache's, for every
    chart the program pins), so that it overlaps the render, which keeps this process waiting: Helm's version, and each
    package's CRD names (whose parse the renders of its releases then reuse: `fabctl.helm.parse_document`) and default
    values. Nothing is pulled; nothing changes what the check finds."""
    helm_version(helm)
    for pinned in CHARTS:
        package = charts.local(ChartRef(pinned.chart, pinned.version, pinned.repo, pinned.repo))
        if package is not None:
            crd_folder_names(package)
            chart_defaults(package)
