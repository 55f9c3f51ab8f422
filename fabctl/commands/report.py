"""`fabctl report`: the plan as one self-contained HTML page for the reviewers of a change."""

from __future__ import annotations

import argparse
import io
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from fabctl.commands.charts import Charts, chart_options, chart_source, render_with_charts
from fabctl.commands.check import deploy_check, excepted_charts, strict_status, unchecked_lines
from fabctl.commands.common import EXIT_CHECK, EXIT_CRASH, EXIT_DANGER, EXIT_POLICY, EXIT_USAGE, saved_plan, stack_site
from fabctl.policy import PolicyPackError, analyze_counted
from fabctl.progress import Phases
from fabctl.render import Plan, RenderError, render
from fabctl.report import Guards, page_data
from fabctl.report import write as write_report
from fabctl.stackfile import StackFileError


def _git_ref_plan(stack: str, project: Path, ref: str, err: Console) -> tuple[Plan, str] | int:
    """The stack rendered as it is at a git ref of the project (its program and its stack file there), and how the
    report names it; a ref without the stack file is a new stack: an empty plan, so that everything is added."""
    with tempfile.TemporaryDirectory(prefix="fab-base-") as tmp:
        try:
            archive = subprocess.run(["git", "-C", str(project), "archive", "--format=tar", ref], capture_output=True, check=False)
        except FileNotFoundError:
            err.print("error: --base needs git on the PATH; or compare with a saved plan: --against PLAN_JSON",
                      markup=False, highlight=False)
            return EXIT_USAGE
        if archive.returncode != 0:
            said = archive.stderr.decode(errors="replace").strip().splitlines()
            err.print(f"error: --base {ref}: {said[-1] if said else 'git archive failed'}; give a branch, tag or commit of the "
                      "project's git repository, or compare with a saved plan: --against PLAN_JSON", markup=False, highlight=False)
            return EXIT_USAGE
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        if not (Path(tmp) / f"Pulumi.{stack}.yaml").is_file():
            return Plan(stack=stack, resources=[]), f"{ref} (no Pulumi.{stack}.yaml there: a new stack)"
        try:
            return render(stack, Path(tmp)), ref
        except (StackFileError, RenderError) as exc:
            err.print(f"error: {stack} does not render at {ref}, so there is nothing to compare with: {exc}",
                      markup=False, highlight=False)
            return EXIT_USAGE


def cmd_report(args: argparse.Namespace, console: Console, err: Console) -> int:
    """Write the plan report page; exit as plan and diff would on what it shows (a mandatory policy, a check error,
    a protected resource replaced or deleted), after writing it."""
    charts = None if args.no_check else chart_source(args, err)  # before the render: a wrong option is said at once
    if isinstance(charts, int):
        return charts
    with Phases(err, f"report {args.stack}") as phases:
        return _report(args, console, err, charts, phases)


def _report(args: argparse.Namespace, console: Console, err: Console, charts: Charts | None, phases: Phases) -> int:
    project = Path(args.project_dir)
    before: tuple[Plan, str] | int | None = None
    if args.against:
        saved = saved_plan(Path(args.against), args.stack, err)
        before = saved if isinstance(saved, int) else (saved, str(args.against))
    elif args.base:
        with phases.phase(f"render at {args.base}"):
            before = _git_ref_plan(args.stack, project, args.base, err)
    if isinstance(before, int):
        return before
    with phases.phase("render"):
        plan = render_with_charts(args.stack, project, err, charts)
    if isinstance(plan, int):
        return plan
    site = stack_site(plan, project, err)
    if isinstance(site, int):
        return site
    guards = Guards()
    if not args.no_policies:
        try:
            with phases.phase("policies"):
                guards.policies, guards.policy_count = analyze_counted(plan)
        except PolicyPackError as exc:
            err.print(f"error: {exc}", markup=False, highlight=False)
            return EXIT_CRASH
    if charts is not None:
        checked = deploy_check(plan, args, err, charts, phases)
        if isinstance(checked, int):
            return checked
        guards.check = checked
        guards.warnings = [f"check.accept: {line}" for line in checked.unmatched]
    data = page_data(plan, site, guards, *(before or (None, None)),
                     kubernetes_objects=guards.check.objects if guards.check else None)
    try:
        path = write_report(data, Path(args.out))
    except OSError as exc:
        err.print(f"error: cannot write the report to {args.out}: {exc.strerror or exc}", markup=False, highlight=False)
        return EXIT_USAGE
    policies = "policies not run" if guards.policies is None else f"{len(guards.policies)} policy violations"
    checked_line = ("check not run" if guards.check is None
                    else f"{len(guards.check.errors)} check errors, {guards.check.unchecked_text()}")
    console.print(f"wrote {path}: {len(data.clusters)} clusters, {data.resource_count} resources, {policies}, {checked_line}"
                  + (f", {len(data.changes)} changes against {data.compared_with}" if data.changes is not None else ""),
                  markup=False, highlight=False)
    phases.done()  # before the lines about what was not checked, which come last
    strict = 0
    if guards.check is not None and charts is not None:
        for line in unchecked_lines(guards.check, charts, excepted_charts(args)):
            console.print(line, markup=False, highlight=False)
        strict = strict_status(guards.check, args, err)
    if any(v.mandatory for v in guards.policies or []):
        return EXIT_POLICY
    if guards.check is not None and guards.check.errors:
        return EXIT_CHECK
    return strict or (EXIT_DANGER if data.dangerous_changes else 0)


def add_parser(sub: Any, project_dir: Path) -> None:
    report = sub.add_parser("report", help="the plan as one static HTML page for the reviewers of a change")
    report.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    report.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    report.add_argument("--out", required=True, metavar="DIR", help="folder to write index.html to")
    compared = report.add_mutually_exclusive_group()
    compared.add_argument("--against", metavar="PLAN_JSON", help="show the changes against a saved plan.json (fabctl plan)")
    compared.add_argument("--base", metavar="REF", help="show the changes against the stack at a git ref of the project "
                          "(its program and stack file there), e.g. origin/main")
    report.add_argument("--no-policies", action="store_true", help="skip the policy pack (it runs by default)")
    report.add_argument("--no-check", action="store_true", help="skip the deploy check (it runs by default)")
    chart_options(report)
    report.set_defaults(func=cmd_report)
