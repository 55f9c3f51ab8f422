"""The plan report as one self-contained HTML page: the template with its stylesheet, script and diagram inline, so
that the page opens from disk, offline, and asks nothing of any network (its Content-Security-Policy forbids it)."""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import groupby
from pathlib import Path

import jinja2
from markupsafe import Markup

from fabctl.access.matrix import NOT_SEEN
from fabctl.access.model import AREAS
from fabctl.check import Report as CheckReport
from fabctl.report.diagram import site_svg
from fabctl.report.model import PageData

HERE = Path(__file__).parent
PAGE_NAME = "index.html"


def noun(count: int, one: str, many: str) -> str:
    """`one` or `many`, as `count` asks: the page's cards read "1 model served", "2 models served"."""
    return one if count == 1 else many


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    environment.filters["noun"] = noun
    return environment


def html(data: PageData) -> str:
    """The page: every value escaped (names and descriptions come from the stack file), the inputs as JSON that the
    script shows on demand."""
    tree = []
    for target, entries in groupby(data.tree, key=lambda e: e.target):
        members = list(entries)
        components = [(component, list(group)) for component, group in groupby(members, key=lambda e: e.component)]
        tree.append((target, len(members), components))
    pools: dict[tuple[str, str], dict[str, object]] = defaultdict(dict)
    for row in data.pools:
        pools[(row.cluster, row.pool)][row.profile] = row
    quotas: dict[tuple[str, str | None, str], dict[str, object]] = defaultdict(dict)
    for quota in data.quotas:
        quotas[(quota.team, quota.peer, quota.cluster)][quota.profile] = quota
    mandatory = sum(1 for v in data.guards.policies or [] if v.mandatory)
    check = data.guards.check
    check_errors = len(check.errors) if check is not None else 0
    unchecked = check.unchecked if check is not None else 0
    findings = sorted(data.guards.check.findings, key=lambda f: (not f.blocking, f.severity != "error", f.cluster, f.rule, f.subject)) \
        if data.guards.check is not None else []
    counts = Counter(c.action for c in data.changes or [])
    return _environment().get_template("report.html.j2").render(
        d=data,
        css=Markup((HERE / "assets" / "report.css").read_text()),
        js=Markup((HERE / "assets" / "report.js").read_text()),
        svg=Markup(site_svg(data)),
        tree=tree,
        pool_table=[(key, [rows.get(p) for p in data.profiles]) for key, rows in sorted(pools.items())],
        quota_table=[(key, [rows.get(p) for p in data.profiles])
                     for key, rows in sorted(quotas.items(), key=lambda item: (item[0][1] or "", item[0][0], item[0][2]))],
        mandatory=mandatory,
        blocking=mandatory + check_errors,
        unchecked=unchecked,
        # Never green while a release went unchecked: its objects may hold what any rule would refuse.
        guard_state="bad" if mandatory + check_errors else "warn" if unchecked else "",
        check_state="bad" if check_errors else "warn" if unchecked else "good",
        unchecked_releases=_unchecked_releases(check) if check is not None else [],
        dangerous=len(data.dangerous_changes),
        handed_over=sum(1 for c in data.changes or [] if c.action == "handed over"),
        findings=findings,
        access_table=[(team, [(area, [a for a in found if a.area == area]) for area in AREAS], sum(1 for a in found if a.escalation))
                      for team, found in data.team_access.items()],
        access_not_seen=NOT_SEEN,
        change_counts=[(action, counts[action]) for action in ("added", "changed", "replaced", "deleted", "handed over") if counts[action]],
    )


def _unchecked_releases(check: CheckReport) -> list[tuple[str, str, str, str]]:
    """(cluster, release, chart, why) of every release the deploy check could not see."""
    missing = [(gone.cluster, gone.release["name"], str(gone.chart), gone.reason) for gone in check.missing]
    refused = [(r.cluster, r.release["name"], str(r.chart), "Helm refused to render it (its charts.render error above)")
               for r in check.releases if r.error]
    return sorted(missing + refused)


def write(data: PageData, out: Path) -> Path:
    """Write the page to `out/index.html` and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / PAGE_NAME
    path.write_text(html(data), encoding="utf-8")
    return path
