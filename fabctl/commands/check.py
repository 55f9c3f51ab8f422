"""`fabctl check`: prove offline that the plan can deploy on empty clusters, in order; the deploy check that `plan` and
`report` run too, with its lines about the releases it could not see and --strict."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from fabctl.check import Report as CheckReport
from fabctl.check import ValuesCheck, check
from fabctl.commands.charts import Charts, chart_options, chart_source, render_with_charts
from fabctl.commands.common import EXIT_CHECK, stack_site
from fabctl.helm import render_releases
from fabctl.progress import Phases
from fabctl.render import HELM_RELEASE_TYPE, Plan


def deploy_check(plan: Plan, args: argparse.Namespace, err: Console, charts: Charts | None = None,
                 phases: Phases | None = None) -> CheckReport | int:
    """The deploy check's report (releases whose chart cannot be had, or all of them without Helm, are listed in it as
    missing), or the exit status after saying why it could not run."""
    found = charts or chart_source(args, err)
    if isinstance(found, int):
        return found
    phases = phases or Phases()
    project = Path(args.project_dir)
    site = stack_site(plan, project, err)
    if isinstance(site, int):
        return site
    found.ready()
    with phases.phase("Helm renders", total=len(plan.of_type(HELM_RELEASE_TYPE))) as advance:
        releases, missing = render_releases(plan, found.source, found.helm, project, advance)
    return check(plan, site, releases, missing, ValuesCheck(found.helm, project) if found.helm else None, phases)


def excepted_charts(args: argparse.Namespace) -> frozenset[str] | None:
    """The charts whose releases may stay unchecked: None without --strict or --strict-except (any may), none with --strict."""
    if getattr(args, "strict_except", None) is not None:
        return args.strict_except
    return frozenset() if getattr(args, "strict", False) else None


def unchecked_lines(report: CheckReport, charts: Charts, excepted: frozenset[str] | None) -> list[str]:
    """The loud ending of a check that could not see every release: which ones, and how to get what they need."""
    if not report.unchecked:
        return []
    count = f"{report.unchecked} of {report.total_releases} releases"
    refused = [r for r in report.releases if r.error]
    if charts.helm is None:
        lines = [(f"NOT CHECKED: {count} of {report.stack}: no Helm was found (--helm, FAB_HELM, helm beside this Python, "
                  "helm on the PATH), so no release was rendered and only the program's own objects were checked."),
                 "Install the pinned Helm into the virtualenv with `make setup` (venv/bin/helm), or pass --helm PATH."]
    else:
        lines = [f"NOT CHECKED: {count} of {report.stack}; what they install is unknown to the check:"]
        lines += [f"  {gone.cluster} {gone.release['name']}: {gone.chart}: no chart package"
                  for gone in sorted(report.missing, key=lambda m: (m.cluster, m.release["name"]))]
        lines += [f"  {r.cluster} {r.release['name']}: {r.chart}: Helm refused to render it (its charts.render error above)"
                  for r in refused]
        pulls = list(dict.fromkeys(gone.chart.pull_command(charts.cache) for gone in report.missing))
        if pulls:
            lines.append("Pull their charts into the chart cache, where the next run finds them, or pass a folder that holds "
                         "them with --charts DIR:")
            lines += [f"  {command}" for command in pulls]
    if excepted is None:
        tail = "; --strict makes this an error"
    elif forbidden := _forbidden(report, excepted):
        tail = f" (--strict{'-except' if excepted else ''}: {len(forbidden)} of them may not be)"
    else:
        tail = f" (allowed by --strict-except {','.join(sorted(excepted))})"
    lines.append(f"NOT CHECKED: {count}{tail}")
    return lines


def _forbidden(report: CheckReport, excepted: frozenset[str]) -> list[str]:
    """The unchecked releases that --strict (or --strict-except, but for the charts it names) makes an error."""
    unseen = [(gone.cluster, gone.release["name"], gone.chart.name) for gone in report.missing]
    unseen += [(r.cluster, r.release["name"], r.chart.name) for r in report.releases if r.error]
    return [f"{cluster} {name}" for cluster, name, chart in sorted(unseen) if chart not in excepted]


def strict_status(report: CheckReport, args: argparse.Namespace, err: Console) -> int:
    """EXIT_CHECK, after saying so, when --strict or --strict-except forbids a release the check did not see."""
    excepted = excepted_charts(args)
    if excepted is None:
        return 0
    forbidden = _forbidden(report, excepted)
    for name in _excepted_unused(report, excepted):
        err.print(f"warning: --strict-except names {name}, which no release of {report.stack} installs", markup=False,
                  highlight=False)
    if not forbidden:
        return 0
    option = f"--strict-except {','.join(sorted(excepted))}" if excepted else "--strict"
    err.print(f"error: {len(forbidden)} {'release' if len(forbidden) == 1 else 'releases'} NOT checked and {option} forbids "
              f"it: {', '.join(forbidden)}", markup=False, highlight=False)
    return EXIT_CHECK


def _excepted_unused(report: CheckReport, excepted: frozenset[str]) -> list[str]:
    charts = {r.chart.name for r in report.releases} | {gone.chart.name for gone in report.missing}
    return sorted(excepted - charts)


def run_check(plan: Plan, args: argparse.Namespace, console: Console, err: Console, charts: Charts | None = None,
              phases: Phases | None = None) -> int:
    found = charts or chart_source(args, err)
    if isinstance(found, int):
        return found
    phases = phases or Phases()
    report = deploy_check(plan, args, err, found, phases)
    if isinstance(report, int):
        return report
    missing = report.missing
    for gone in sorted(missing, key=lambda m: (m.cluster, m.release["name"])):
        console.print(f"not rendered: {gone.cluster} {gone.release['name']}: {gone.reason}", markup=False, highlight=False)
    for finding in sorted(report.findings, key=lambda f: (f.severity != "error", f.cluster, f.rule, f.subject)):
        (err if finding.blocking else console).print(finding.line(), markup=False, highlight=False)
    for line in report.unmatched:
        console.print(f"warning: {line}", markup=False, highlight=False)
    console.print(report.summary(), markup=False, highlight=False)
    phases.done()  # before the lines about what was not checked, which come last
    for line in unchecked_lines(report, found, excepted_charts(args)):
        console.print(line, markup=False, highlight=False)
    strict = strict_status(report, args, err)
    return EXIT_CHECK if report.errors else strict


def cmd_check(args: argparse.Namespace, console: Console, err: Console) -> int:
    charts = chart_source(args, err)  # before the render: a wrong option is said at once
    if isinstance(charts, int):
        return charts
    with Phases(err, f"check {args.stack}") as phases:
        with phases.phase("render"):
            plan = render_with_charts(args.stack, Path(args.project_dir), err, charts)
        if isinstance(plan, int):
            return plan
        return run_check(plan, args, console, err, charts, phases)


def add_parser(sub: Any, project_dir: Path) -> None:
    command = sub.add_parser("check", help="prove offline that the plan can deploy on empty clusters, in order")
    command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    command.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    chart_options(command)
    command.set_defaults(func=cmd_check)
