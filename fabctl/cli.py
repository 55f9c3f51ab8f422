"""`python -m fabctl`: offline tooling for site stacks.

    plan --stack STACK [--out DIR]   render the stack under mocks, print a tree, write manifests and plan.json,
                                     run the policy pack on it (--no-policies skips it), then the deploy check
                                     (--no-check skips it)
    check --stack STACK [--charts DIR] [--helm PATH] [--chart-cache DIR] [--strict | --strict-except CHART,...]
                                     prove offline that the plan can deploy on empty clusters, in order: every
                                     Helm release rendered with real Helm (its chart from DIR, else the chart cache, else
                                     pulled from its repository); releases it cannot render are listed as NOT checked,
                                     an error only with --strict (or --strict-except, but for the charts it names)
    diff --stack STACK [--set PATH=VALUE ...] [--against PLAN_JSON]
                                     what a change adds, removes, changes and replaces
    graph --stack STACK [--out FILE] the site as a Mermaid diagram (default docs/graphs/<stack>.md)
    flows --stack STACK              the cross-cluster flow matrix
    access --stack STACK --as team:T|vendor:V|user:U[@GROUP,...]|pr-author [--format table|json]
                                     what that seat can do, per area (RBAC with escalation paths, CI, ...), from
                                     the offline render (docs/security.md, "Who can do what: fabctl access")
    import --stack STACK [--out FILE] the `pulumi import` file of the objects the stack adopts (config `adopt`)
    stack-name --stack STACK [--organization ORG]
                                     the stack's <organization>/fab-platform/<stack> name (CI)
    serving render --stack STACK --out DIR [--check]
                                     write the serving repository Argo CD applies: each model's objects as
                                     `inference.delivery: pulumi` registers them, under DIR/<cluster>/<model>/
                                     (--check: write nothing, list what differs, exit 1 if anything does)
    serving handover --stack STACK   the `pulumi state delete` commands that hand the live serving objects to Argo CD
    mirror --stack STACK [--set PATH=VALUE ...] [--node-os OS ...] [--digests FILE] [--out DIR]
                                     everything the site's registry must hold (charts, images, release files, Maven
                                     packages), source -> mirror, and with --out the inputs of skopeo, helm and curl
                                     (docs/airgap.md); exit 6 if the plan names an image outside the registry or a
                                     release could not be rendered (the list would be incomplete)
    report --stack STACK --out DIR [--against PLAN_JSON | --base REF] [--no-policies] [--no-check]
                                     the plan as one self-contained HTML page (DIR/index.html): the site at a glance,
                                     its resources, capacity, the guards' results and the changes against a saved plan
                                     or the stack at a git ref; exits as plan and diff would on what it shows
    schema [--check]                 write (or check) schema/stack.schema.json and docs/configuration.md tables
    verify --stack STACK --phase N [--render --out DIR] [--junit FILE] [--markdown FILE]
                                     run the phase's acceptance jobs on the live site and report per criterion, or
                                     write them as YAML (--render); its own exit statuses: fabctl/verify/cli.py

Exit status: 0 success, 1 the stack's config or its stack file is wrong (one line per problem), 2 bad usage
or no such stack file, 3 the program crashed (a bug: the traceback is printed), 4 a mandatory policy is violated,
5 (diff) a protected resource would be replaced or deleted, 6 the deploy check found errors (or, with --strict, could not
check a release).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before a site is parsed)
from components.config import PROJECT, ConfigError, SiteConfig, parse_site, stack_file_schema
from fabctl import runs
from fabctl.access import cli as access_cli
from fabctl.check import Report as CheckReport
from fabctl.check import ValuesCheck, check
from fabctl.check import prepare as prepare_check
from fabctl.diff import diff, set_path, unset_path
from fabctl.graph import flow_rows, graph_page, with_readme_graph
from fabctl.helm import (
    ChartPackages,
    ChartRepositories,
    ChartSource,
    ChartSources,
    NoSuchHelm,
    find_helm,
    render_cache,
    render_releases,
)
from fabctl.mirror import DigestFileError, manifest, plain_list, read_digests
from fabctl.mirror import write as write_mirror
from fabctl.policy import PolicyPackError, analyze, analyze_counted
from fabctl.progress import Phases
from fabctl.reference import with_reference
from fabctl.render import HELM_RELEASE_TYPE, K8S_PROVIDER_TYPE, PROJECT_DIR, SITE_WIDE, Plan, RenderError, render
from fabctl.report import Guards, page_data
from fabctl.report import write as write_report
from fabctl.serving import ServingError, delivered_by_pulumi, drift, handover_commands, serving_tree, write_tree
from fabctl.stackfile import SITE_KEY, NoStackFile, StackFileError, read_stack_config, stack_file
from fabctl.verify import cli as verify_cli

SCHEMA_PATH = PROJECT_DIR / "schema" / "stack.schema.json"
REFERENCE_PATH = PROJECT_DIR / "docs" / "configuration.md"
EXIT_CONFIG, EXIT_USAGE, EXIT_CRASH, EXIT_POLICY, EXIT_DANGER, EXIT_CHECK = 1, 2, 3, 4, 5, 6


def _kind(resource: dict[str, Any]) -> str:
    inputs = resource["inputs"]
    if resource["type"] == HELM_RELEASE_TYPE:
        return f"HelmRelease {inputs.get('chart')} {inputs.get('version')}"
    if resource["type"].startswith("pulumi:providers:"):
        return f"Provider {resource['type'].rsplit(':', 1)[-1]}"
    return str(inputs.get("kind") or resource["type"].rsplit(":", 1)[-1])


def plan_tree(plan: Plan) -> tuple[str, Tree]:
    """A one-line total, and a tree of resources per target (cluster or provider), component and kind."""
    groups: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    components = 0
    for resource in plan.resources:
        if not resource["custom"]:
            components += 1
            continue
        cluster = plan.target(resource) or SITE_WIDE
        top = plan.component(resource)
        owner = f"{top['name']} ({top['type']})" if top else "stack"
        groups[cluster][owner][_kind(resource)] += 1
    total = sum(sum(c.values()) for owners in groups.values() for c in owners.values())
    clusters = sorted(k for k in groups if k != SITE_WIDE and k in plan.cluster_of_provider.values())
    targets = sorted(k for k in groups if k != SITE_WIDE)
    noun = "component" if components == 1 else "components"
    others = len(targets) - len(clusters)
    header = f"{plan.stack}: {total} resources on {len(clusters)} clusters, {others} other providers and site-wide; {components} {noun}"
    tree = Tree(plan.stack, hide_root=True)
    for cluster in [SITE_WIDE, *targets] if SITE_WIDE in groups else targets:
        owners = groups[cluster]
        branch = tree.add(f"[cyan]{cluster}[/]: {sum(sum(c.values()) for c in owners.values())}")
        for owner, kinds in sorted(owners.items()):
            sub = branch.add(f"{owner}: {sum(kinds.values())}")
            for kind, count in sorted(kinds.items()):
                sub.add(f"{kind} x{count}")
    return header, tree


def _manifest_filename(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    name = meta.get("name", "unnamed")
    return f"{obj['kind'].lower()}-{namespace + '-' if namespace else ''}{name}.yaml"


def write_plan(plan: Plan, out_dir: Path) -> Path:
    """Write manifests per cluster, Helm releases per cluster and plan.json under `out_dir/<stack>/`."""
    root = out_dir / plan.stack
    for generated in ("manifests", "releases"):
        shutil.rmtree(root / generated, ignore_errors=True)
    for cluster, obj, _ in plan.manifests():
        path = root / "manifests" / cluster / _manifest_filename(obj)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
    for release in plan.of_type(HELM_RELEASE_TYPE):
        path = root / "releases" / (plan.cluster(release) or SITE_WIDE) / f"{release['inputs'].get('name', release['name'])}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(release["inputs"], sort_keys=False))
    root.mkdir(parents=True, exist_ok=True)
    (root / "plan.json").write_text(json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
    return root


def cmd_plan(args: argparse.Namespace, console: Console, err: Console) -> int:
    charts = None if args.no_check else _chart_source(args, err)  # before the render: a wrong option is said at once
    if isinstance(charts, int):
        return charts
    with Phases(err, f"plan {args.stack}") as phases:
        with phases.phase("render"):
            plan = _rendered(args.stack, Path(args.project_dir), err, charts)
        if isinstance(plan, int):
            return plan
        header, tree = plan_tree(plan)
        console.print(header, highlight=False, markup=False)
        console.print(tree)
        root = write_plan(plan, Path(args.out))
        providers = len(plan.of_type(K8S_PROVIDER_TYPE))
        console.print(f"{len(plan.manifests())} Kubernetes objects on {providers} clusters written to {root}", highlight=False)
        status = 0
        if not args.no_policies:
            try:
                with phases.phase("policies"):
                    violations = analyze(plan)
            except PolicyPackError as exc:
                err.print(f"error: {exc}", markup=False, highlight=False)
                return EXIT_CRASH
            mandatory = [v for v in violations if v.mandatory]
            for v in violations:
                stream = err if v.mandatory else console
                stream.print(f"{v.level} {v.policy}: {v.message.splitlines()[-1]} ({v.urn.rsplit('::', 1)[-1]})", markup=False, highlight=False)
            console.print(
                f"policies: {len(mandatory)} mandatory and {len(violations) - len(mandatory)} advisory violations", highlight=False
            )
            status = EXIT_POLICY if mandatory else 0
        if args.no_check:
            phases.done()
            return status
        checked = _check(plan, args, console, err, charts, phases)
        return status or checked


@dataclass
class Charts:
    """Where the deploy check gets Helm and the chart packages, as the options and the environment say."""

    helm: Path | None
    """None: no Helm was found, and no release can be rendered."""
    source: ChartSource | None
    cache: Path
    """Where pulled packages are kept (`--chart-cache`), and where `helm pull` may put a package the check lacks."""
    _preparing: threading.Thread | None = None

    def prepare(self) -> None:
        """Start doing what the check will need of the packages at hand (`fabctl.check.prepare`), beside the render."""
        if self.helm is not None and self.source is not None and self._preparing is None:
            self._preparing = threading.Thread(target=self._prepare, name="fabctl-prepare", daemon=True)
            self._preparing.start()

    def _prepare(self) -> None:
        with contextlib.suppress(Exception):  # only work done ahead: the check meets any problem itself, and says it
            prepare_check(self.source, self.helm)

    def ready(self) -> None:
        if self._preparing is not None:
            self._preparing.join()


CACHE_VARIABLE = "FAB_CACHE_DIR"
"""Where fabctl keeps what it fetches and computes again only when its inputs change (pulled chart packages, Helm's renders
and the chart-value trials); default `${XDG_CACHE_HOME:-~/.cache}/fab-platform`. The test suite points it at its session's
folder, so that tests never write to a user's cache."""


def cache_home() -> Path:
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE]).absolute()
    return (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fab-platform").absolute()


def _chart_cache(args: argparse.Namespace) -> Path:
    if args.chart_cache:
        return Path(args.chart_cache).absolute()
    return cache_home() / "charts"


def _chart_source(args: argparse.Namespace, err: Console, upstream: bool = False) -> Charts | int:
    """Helm (`find_helm`) and where chart packages come from, in order: the mirror folder (`--charts`, FAB_CHART_DIR),
    the chart cache (what earlier pulls left), each release's repository, pulled into the cache (with `upstream`,
    each chart's upstream repository); or the exit status after saying what is wrong with the options."""
    try:
        helm = find_helm(args.helm)
    except NoSuchHelm as exc:
        err.print(f"error: {exc}; or leave it out to use the virtualenv's Helm (make setup installs it) or the one on the PATH",
                  markup=False, highlight=False)
        return EXIT_USAGE
    folder = args.charts or os.environ.get("FAB_CHART_DIR")
    if folder and not Path(folder).is_dir():
        err.print(f"error: --charts {folder} is not a folder of chart packages", markup=False, highlight=False)
        return EXIT_USAGE
    cache = _chart_cache(args)
    if cache.exists() and not cache.is_dir():
        err.print(f"error: the chart cache {cache} is not a folder; name another with --chart-cache DIR or {CACHE_VARIABLE}",
                  markup=False, highlight=False)
        return EXIT_USAGE
    if helm is None:
        return Charts(None, None, cache)
    # Absolute paths: a render changes the working directory meanwhile (the config's files are relative to the project).
    helm = helm.absolute()
    sources: list[ChartPackages | ChartRepositories] = [ChartPackages(Path(folder).absolute())] if folder else []
    sources.append(ChartRepositories(helm, cache, upstream, pull=not getattr(args, "no_pull", False)))
    return Charts(helm, ChartSources(sources), cache)


def _stack_site(plan: Plan, project: Path, err: Console) -> SiteConfig | int:
    """The site config of a stack the render has just read and accepted, or the exit status."""
    try:
        with contextlib.chdir(project):  # the config's file paths are relative to the project
            return parse_site(read_stack_config(stack_file(project, plan.stack)).get(SITE_KEY))
    except (StackFileError, ConfigError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_USAGE


def _deploy_check(plan: Plan, args: argparse.Namespace, err: Console, charts: Charts | None = None,
                  phases: Phases | None = None) -> CheckReport | int:
    """The deploy check's report (releases whose chart cannot be had, or all of them without Helm, are listed in it as
    missing), or the exit status after saying why it could not run."""
    found = charts or _chart_source(args, err)
    if isinstance(found, int):
        return found
    phases = phases or Phases()
    project = Path(args.project_dir)
    site = _stack_site(plan, project, err)
    if isinstance(site, int):
        return site
    found.ready()
    with phases.phase("Helm renders", total=len(plan.of_type(HELM_RELEASE_TYPE))) as advance:
        releases, missing = render_releases(plan, found.source, found.helm, project, advance)
    return check(plan, site, releases, missing, ValuesCheck(found.helm, project) if found.helm else None, phases)


def _excepted(args: argparse.Namespace) -> frozenset[str] | None:
    """The charts whose releases may stay unchecked: None without --strict or --strict-except (any may), none with --strict."""
    if getattr(args, "strict_except", None) is not None:
        return args.strict_except
    return frozenset() if getattr(args, "strict", False) else None


def _unchecked_lines(report: CheckReport, charts: Charts, excepted: frozenset[str] | None) -> list[str]:
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


def _strict_status(report: CheckReport, args: argparse.Namespace, err: Console) -> int:
    """EXIT_CHECK, after saying so, when --strict or --strict-except forbids a release the check did not see."""
    excepted = _excepted(args)
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


def _chart_names(text: str) -> frozenset[str]:
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("give chart names separated by commas, for example airflow,superset")
    return names


def _check(plan: Plan, args: argparse.Namespace, console: Console, err: Console, charts: Charts | None = None,
           phases: Phases | None = None) -> int:
    found = charts or _chart_source(args, err)
    if isinstance(found, int):
        return found
    phases = phases or Phases()
    report = _deploy_check(plan, args, err, found, phases)
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
    for line in _unchecked_lines(report, found, _excepted(args)):
        console.print(line, markup=False, highlight=False)
    strict = _strict_status(report, args, err)
    return EXIT_CHECK if report.errors else strict


def cmd_check(args: argparse.Namespace, console: Console, err: Console) -> int:
    charts = _chart_source(args, err)  # before the render: a wrong option is said at once
    if isinstance(charts, int):
        return charts
    with Phases(err, f"check {args.stack}") as phases:
        with phases.phase("render"):
            plan = _rendered(args.stack, Path(args.project_dir), err, charts)
        if isinstance(plan, int):
            return plan
        return _check(plan, args, console, err, charts, phases)


def _rendered(stack: str, project_dir: Path, err: Console, charts: Charts | None = None, config: dict[str, Any] | None = None,
              noted: tuple[str, ...] = ()) -> Plan | int:
    """`_render_or_report`, with what the check needs of the chart packages prepared meanwhile (`python -m fabctl` runs
    the renders of a command from one preloaded renderer: fabctl/__main__.py)."""
    if charts is not None:
        charts.prepare()
    return _render_or_report(stack, project_dir, err, config, noted)


def _render_or_report(stack: str, project_dir: Path, err: Console, config: dict[str, Any] | None = None,
                      noted: tuple[str, ...] = ()) -> Plan | int:
    """A render, or the exit status after printing why there is none. A note names each secret it stands in for, except
    those `noted` already."""
    try:
        plan = render(stack, project_dir, config)
    except StackFileError as exc:
        return _stack_file_error(exc, err)
    except RenderError as exc:
        if not exc.user:
            err.print(f"error: the program crashed rendering {stack} (a bug, not your config):\n{exc}", markup=False)
            return EXIT_CRASH
        for line in str(exc).splitlines():
            err.print(f"error: {line}", markup=False, highlight=False)
        return EXIT_CONFIG
    for key in (key for key in plan.stand_ins if key not in noted):
        err.print(f"note: {PROJECT}:{key} is not set on {stack}: rendered with a redacted stand-in; before pulumi up: "
                  f"pulumi config set --secret {key} <value>", markup=False, highlight=False)
    return plan


def _stack_file_error(exc: StackFileError, err: Console) -> int:
    """Print why a stack file cannot be used: a missing one is a usage mistake, a broken one a config mistake."""
    for line in str(exc).splitlines():
        err.print(f"error: {line}", markup=False, highlight=False)
    return EXIT_USAGE if isinstance(exc, NoStackFile) else EXIT_CONFIG


def cmd_diff(args: argparse.Namespace, console: Console, err: Console) -> int:
    project = Path(args.project_dir)
    if not args.set and not args.unset and not args.against:
        err.print("error: give --set PATH=VALUE, --unset PATH or --against PLAN_JSON", markup=False)
        return EXIT_USAGE
    if args.against:
        before: Plan | int = _saved_plan(Path(args.against), args.stack, err)
    else:
        before = _render_or_report(args.stack, project, err)
    if isinstance(before, int):
        return before
    try:
        config = read_stack_config(stack_file(project, args.stack))
        for assignment in args.set or []:
            set_path(config, assignment, SITE_KEY)
        for path in args.unset or []:
            unset_path(config, path, SITE_KEY)
    except StackFileError as exc:
        return _stack_file_error(exc, err)
    except ValueError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_USAGE
    after = _render_or_report(args.stack, project, err, config, noted=before.stand_ins)
    if isinstance(after, int):
        return after
    result = diff(before, after)
    short = lambda urn: urn.rsplit("::", 1)[-1]
    for change in result.added:
        console.print(f"+ {short(change.urn)} ({change.type})", markup=False, highlight=False)
    for change in result.changed:
        console.print(f"~ {short(change.urn)} ({change.type}): {', '.join(change.paths)}", markup=False, highlight=False)
    for change in result.replaced:
        mark = " PROTECTED" if change.protected else ""
        console.print(f"+- {short(change.urn)} ({change.type}) replaced{mark}: {', '.join(change.paths)}", markup=False, highlight=False)
    for change in result.removed:
        mark = " PROTECTED" if change.protected else ""
        hint = " (a rename deletes and re-creates: keep the key, or move it with an alias)" if change.protected else ""
        console.print(f"- {short(change.urn)} ({change.type}) deleted{mark}{hint}", markup=False, highlight=False)
    for change in result.handed_over:
        console.print(f"> {short(change.urn)} ({change.type}) handed over to Argo CD", markup=False, highlight=False)
    if result.handed_over:
        console.print(
            f"{len(result.handed_over)} serving objects are handed over to Argo CD: take them out of the stack before "
            f"`pulumi up`, or it deletes them and the models stop serving. The commands: python -m fabctl serving handover "
            f"--stack {args.stack} (docs/operations.md, \"Serving through Argo CD\")",
            markup=False, highlight=False,
        )
    console.print(
        f"{len(result.added)} to add, {len(result.changed)} to change, {len(result.replaced)} to replace, "
        f"{len(result.removed)} to delete{f', {len(result.handed_over)} to hand over' if result.handed_over else ''}; "
        f"{len(result.dangerous)} protected resources replaced or deleted",
        highlight=False,
    )
    return EXIT_DANGER if result.dangerous else 0


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


def _saved_plan(path: Path, stack: str, err: Console) -> Plan | int:
    """A plan.json written by `fabctl plan` for `stack`, or the exit status after saying what is wrong with it."""
    write_one = f"write one with: python -m fabctl plan --stack {stack} --out DIR"
    if not path.is_file():
        err.print(f"error: no plan at {path}; {write_one}", markup=False, highlight=False)
        return EXIT_USAGE
    try:
        saved = json.loads(path.read_text())
        plan = Plan(stack=saved["stack"], resources=list(saved["resources"]), outputs=saved.get("outputs") or {})
    except (ValueError, KeyError, TypeError) as exc:
        reason = f"no {exc} key" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        err.print(f"error: {path} is not a plan that fabctl plan writes ({reason}); {write_one}", markup=False, highlight=False)
        return EXIT_USAGE
    if plan.stack != stack:
        err.print(f"error: {path} is the plan of stack {plan.stack}, not {stack}: compare a stack with a plan of its own",
                  markup=False, highlight=False)
        return EXIT_USAGE
    return plan


def cmd_report(args: argparse.Namespace, console: Console, err: Console) -> int:
    """Write the plan report page; exit as plan and diff would on what it shows (a mandatory policy, a check error,
    a protected resource replaced or deleted), after writing it."""
    charts = None if args.no_check else _chart_source(args, err)  # before the render: a wrong option is said at once
    if isinstance(charts, int):
        return charts
    with Phases(err, f"report {args.stack}") as phases:
        return _report(args, console, err, charts, phases)


def _report(args: argparse.Namespace, console: Console, err: Console, charts: Charts | None, phases: Phases) -> int:
    project = Path(args.project_dir)
    before: tuple[Plan, str] | int | None = None
    if args.against:
        saved = _saved_plan(Path(args.against), args.stack, err)
        before = saved if isinstance(saved, int) else (saved, str(args.against))
    elif args.base:
        with phases.phase(f"render at {args.base}"):
            before = _git_ref_plan(args.stack, project, args.base, err)
    if isinstance(before, int):
        return before
    with phases.phase("render"):
        plan = _rendered(args.stack, project, err, charts)
    if isinstance(plan, int):
        return plan
    site = _stack_site(plan, project, err)
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
        checked = _deploy_check(plan, args, err, charts, phases)
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
        for line in _unchecked_lines(guards.check, charts, _excepted(args)):
            console.print(line, markup=False, highlight=False)
        strict = _strict_status(guards.check, args, err)
    if any(v.mandatory for v in guards.policies or []):
        return EXIT_POLICY
    if guards.check is not None and guards.check.errors:
        return EXIT_CHECK
    return strict or (EXIT_DANGER if data.dangerous_changes else 0)


def _serving_tree(args: argparse.Namespace, err: Console) -> dict[str, Any] | int:
    """The serving objects the stack registers with `inference.delivery: pulumi`, or the exit status."""
    project = Path(args.project_dir)
    try:
        config = delivered_by_pulumi(read_stack_config(stack_file(project, args.stack)))
    except StackFileError as exc:
        return _stack_file_error(exc, err)
    except ServingError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_CONFIG
    plan = _render_or_report(args.stack, project, err, config)
    if isinstance(plan, int):
        return plan
    try:
        return serving_tree(plan, config)
    except ServingError as exc:
        err.print(f"error: the program crashed rendering {args.stack} (a bug, not your config): {exc}", markup=False)
        return EXIT_CRASH


def cmd_serving(args: argparse.Namespace, console: Console, err: Console) -> int:
    tree = _serving_tree(args, err)
    if isinstance(tree, int):
        return tree
    if args.action == "handover":
        for command in handover_commands(tree, args.stack):
            console.print(command, markup=False, highlight=False, soft_wrap=True)
        return 0
    out = Path(args.out)
    if args.check:
        found = drift(tree, out)
        for line in found:
            console.print(line, markup=False, highlight=False)
        if found:
            console.print(f"{len(found)} files of {out} differ from the stack's render: re-render with fabctl serving render, or "
                          "bring the stack file's revision and canary in step with the repository", highlight=False)
            return EXIT_CONFIG
        console.print(f"{out} is the stack's render ({len(tree)} files)", highlight=False)
        return 0
    written = write_tree(tree, out)
    models = sorted({path.rsplit("/", 1)[0] for path in tree})
    console.print(f"wrote {len(written)} files for {len(models)} model{'' if len(models) == 1 else 's'} under {out}: "
                  f"{', '.join(models)}", highlight=False)
    return 0


def cmd_graph(args: argparse.Namespace, console: Console, err: Console) -> int:
    plan = _render_or_report(args.stack, Path(args.project_dir), err)
    if isinstance(plan, int):
        return plan
    out = Path(args.out) if args.out else PROJECT_DIR / "docs" / "graphs" / f"{args.stack}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(graph_page(plan))
    console.print(f"wrote {out}", highlight=False)
    if not args.out:  # the README embeds the diagrams of the checked-in stacks
        readme = PROJECT_DIR / "README.md"
        updated = with_readme_graph(readme.read_text(), plan)
        if updated != readme.read_text():
            readme.write_text(updated)
            console.print(f"updated {readme}", highlight=False)
    return 0


def cmd_flows(args: argparse.Namespace, console: Console, err: Console) -> int:
    plan = _render_or_report(args.stack, Path(args.project_dir), err)
    if isinstance(plan, int):
        return plan
    table = Table(title=f"{args.stack}: allowed cross-cluster flows (everything else is denied)")
    for column in ("flow", "from", "to", "port (pods)", "target", "why"):
        table.add_column(column)
    for row in flow_rows(plan):
        table.add_row(*row)
    console.print(table)
    return 0


def import_file(plan: Plan) -> dict[str, Any]:
    """A `pulumi import --file` document for the objects the stack adopts (`adopt` in its config): what the
    program imports on its next `pulumi up`, for operators who import ahead of it."""
    adopted = [r for r in plan.resources if r.get("import_id")]
    names: dict[str, str] = {}
    for record in adopted:
        for urn in (record.get("parent"), record.get("provider")):
            if urn in plan.by_urn:  # the stack itself is no record: top-level resources have no parent entry
                names.setdefault(plan.by_urn[urn]["name"], urn)
    resources = []
    for record in adopted:
        entry = {"type": record["type"], "name": record["name"], "id": record["import_id"]}
        if record.get("parent") in plan.by_urn:
            entry["parent"] = plan.by_urn[record["parent"]]["name"]
        if record.get("provider") in plan.by_urn:
            entry["provider"] = plan.by_urn[record["provider"]]["name"]
        resources.append(entry)
    return {"nameTable": dict(sorted(names.items())), "resources": resources}


def cmd_import(args: argparse.Namespace, console: Console, err: Console) -> int:
    plan = _render_or_report(args.stack, Path(args.project_dir), err)
    if isinstance(plan, int):
        return plan
    found = import_file(plan)
    document = json.dumps(found, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(document)
        err.print(f"wrote {args.out}: {len(found['resources'])} objects to import", markup=False, highlight=False)
    else:
        console.print(document, markup=False, highlight=False, end="")
    return 0


def cmd_stack_name(args: argparse.Namespace, console: Console, err: Console) -> int:
    """The stack's fully qualified name, `<organization>/fab-platform/<stack>`, for CI: the stack file's
    `federation.organization`, which must agree with `--organization` (the CI's) when both are given."""
    project = Path(args.project_dir)
    try:
        raw = read_stack_config(stack_file(project, args.stack)).get(SITE_KEY)
        with contextlib.chdir(project):  # the config's file paths are relative to the project
            site = parse_site(raw)
    except StackFileError as exc:
        return _stack_file_error(exc, err)
    except ConfigError as exc:
        for line in exc.lines:
            err.print(f"error: {line}", markup=False, highlight=False)
        return EXIT_CONFIG
    declared, given = site.federation.organization, args.organization or None
    if declared and given and declared != given:
        err.print(f"error: Pulumi.{args.stack}.yaml names organization {declared!r} (federation.organization) but this run "
                  f"deploys to {given!r}; make them agree", markup=False, highlight=False)
        return EXIT_USAGE
    if not (declared or given):
        err.print(f"error: no organization for {args.stack}: set federation.organization in Pulumi.{args.stack}.yaml or "
                  "pass --organization", markup=False, highlight=False)
        return EXIT_USAGE
    console.print(f"{declared or given}/{PROJECT}/{args.stack}", markup=False, highlight=False)
    return 0


def cmd_schema(args: argparse.Namespace, console: Console, err: Console) -> int:
    """Write, or check, every file generated from the config model: the JSON Schema and the reference tables."""
    generated = {
        SCHEMA_PATH: json.dumps(stack_file_schema(), indent=2, sort_keys=True) + "\n",
        REFERENCE_PATH: with_reference(REFERENCE_PATH.read_text()),
    }
    stale = [path for path, text in generated.items() if not path.is_file() or path.read_text() != text]
    if args.check:
        for path in stale:
            err.print(f"error: {path.relative_to(PROJECT_DIR)} is out of date; run: python -m fabctl schema", markup=False)
        if not stale:
            console.print("schema and configuration reference are up to date", highlight=False)
        return EXIT_CONFIG if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated[path])
        console.print(f"wrote {path.relative_to(PROJECT_DIR)}", highlight=False)
    return 0


DIGESTS_FILE = "image-digests.yaml"
"""The project's digest file (source image -> sha256 digest), read by `fabctl mirror` when it exists."""


def cmd_mirror(args: argparse.Namespace, console: Console, err: Console) -> int:
    """List what the stack's registry must hold, and write the mirroring tools' inputs."""
    charts = _chart_source(args, err, upstream=True)  # the registry does not hold the charts yet
    if isinstance(charts, int):
        return charts
    if charts.helm is None:
        err.print("error: no Helm found (--helm, FAB_HELM, helm beside this Python, helm on the PATH): the mirror list needs "
                  "every release rendered; install the pinned Helm with `make setup` (venv/bin/helm) or pass --helm PATH",
                  markup=False, highlight=False)
        return EXIT_USAGE
    project = Path(args.project_dir)
    try:
        config = read_stack_config(stack_file(project, args.stack))
        for assignment in args.set or []:
            set_path(config, assignment, SITE_KEY)
        digest_file = Path(args.digests) if args.digests else project / DIGESTS_FILE
        digests = read_digests(digest_file) if args.digests or digest_file.is_file() else {}
    except StackFileError as exc:
        return _stack_file_error(exc, err)
    except (ValueError, DigestFileError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_USAGE
    if not (config.get(SITE_KEY) or {}).get("registry"):
        err.print(f"error: {args.stack} has no registry: add `registry` to its site config (docs/airgap.md), or name one "
                  "here with --set site.registry.charts=oci://HOST/PATH --set site.registry.images=HOST/PATH",
                  markup=False, highlight=False)
        return EXIT_USAGE
    with Phases(err, f"mirror {args.stack}") as phases:
        with phases.phase("render"):
            plan = _rendered(args.stack, project, err, charts, config)
        if isinstance(plan, int):
            return plan
        with contextlib.chdir(project):  # the config's file paths are relative to the project
            site = parse_site(config.get(SITE_KEY))
        charts.ready()
        with phases.phase("Helm renders", total=len(plan.of_type(HELM_RELEASE_TYPE))) as advance:
            rendered, missing = render_releases(plan, charts.source, charts.helm, project, advance)
        phases.done()
    found = manifest(plan, site, rendered, missing, digests, args.node_os, args.node_arch)
    if found.needs_node_os:
        err.print(f"error: {', '.join(found.needs_node_os)}: the operator pulls it with the GPU nodes' OS appended to the "
                  "tag (580.105.08-ubuntu24.04), and only those tags exist upstream; name the nodes' OS with --node-os "
                  "(for example --node-os ubuntu24.04, once per OS the GPU nodes run)", markup=False, highlight=False)
        return EXIT_USAGE
    for line in plain_list(found):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for gone in missing:
        err.print(f"error: {gone.cluster} {gone.release['name']} was not rendered ({gone.reason}): the images of its "
                  "chart are not in the list; give its package with --charts DIR", markup=False, highlight=False)
    for image in found.unpinned:
        err.print(f"warning: {image.source} is mirrored by tag, not by digest: add its digest to {DIGESTS_FILE}",
                  markup=False, highlight=False)
    for reference in found.outside:
        err.print(f"error: {reference} is not under the registry {site.registry.images if site.registry else ''}; "
                  "`fabctl check` says which object names it", markup=False, highlight=False)
    if args.out:
        for path in write_mirror(found, Path(args.out)):
            console.print(f"wrote {path}", markup=False, highlight=False)
    console.print(
        f"mirror {args.stack}: {len(found.charts)} charts, {len(found.images)} images ({len(found.unpinned)} by tag only), "
        f"{len(found.files)} files, {len(found.maven)} Maven packages; {len(found.outside)} images outside the registry, "
        f"{len(missing)} releases not rendered", markup=False, highlight=False,
    )
    return EXIT_CHECK if found.outside or missing else 0


def _chart_options(command: argparse.ArgumentParser, strict: bool = True) -> None:
    command.add_argument("--charts", metavar="DIR", help="local mirror of the chart packages (what `helm pull` writes, or a folder "
                         "with an index.json), looked in first; default $FAB_CHART_DIR")
    command.add_argument("--helm", metavar="PATH", help="the Helm binary; default $FAB_HELM, else helm beside this Python (the "
                         "virtualenv's, from make setup), else helm on the PATH")
    command.add_argument("--chart-cache", metavar="DIR", help="chart packages looked in after --charts, where what is pulled from "
                         "each release's repository is kept (default ~/.cache/fab-platform/charts)")
    command.add_argument("--no-pull", action="store_true", help="take chart packages from --charts and the chart cache only, "
                         "never from a repository (a machine without a network to them, a hermetic CI)")
    cached = command.add_mutually_exclusive_group()
    cached.add_argument("--render-cache", metavar="DIR", help="where the program's renders, Helm's renders and the chart-value "
                        "trials are kept, each under a key of all it depends on (default ~/.cache/fab-platform/renders)")
    cached.add_argument("--no-render-cache", action="store_true", help="render the program and every release and try its "
                        "values again, keeping nothing")
    if strict:
        strictness = command.add_mutually_exclusive_group()
        strictness.add_argument("--strict", action="store_true", help="a release the check could not render (no chart package, "
                                "no Helm) is an error, exit 6; by default it is listed loudly and the exit status ignores it")
        strictness.add_argument("--strict-except", metavar="CHART,...", type=_chart_names, help="as --strict, except for the "
                                "releases of these charts (for a mirror known to lack them), e.g. airflow,superset")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fabctl", description="Offline tooling for fab-platform site stacks.")
    sub = p.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="render a stack offline under Pulumi mocks")
    plan.add_argument("--stack", required=True, help="stack name, e.g. site-a (reads Pulumi.<stack>.yaml)")
    plan.add_argument("--out", default=str(PROJECT_DIR / "out"), help="output folder (default: out/)")
    plan.add_argument(
        "--project-dir", default=str(PROJECT_DIR), help="checkout holding __main__.py and the stack files (default: this one)"
    )
    plan.add_argument("--no-policies", action="store_true", help="skip the policy pack (it runs by default)")
    plan.add_argument("--no-check", action="store_true", help="skip the deploy check (it runs by default)")
    _chart_options(plan)
    plan.set_defaults(func=cmd_plan)
    deploy_check = sub.add_parser("check", help="prove offline that the plan can deploy on empty clusters, in order")
    deploy_check.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    deploy_check.add_argument("--project-dir", default=str(PROJECT_DIR), help="checkout holding __main__.py and the stack files")
    _chart_options(deploy_check)
    deploy_check.set_defaults(func=cmd_check)
    for name, func, help_text in (
        ("stack-name", cmd_stack_name, "the stack's <organization>/fab-platform/<stack> name, for CI"),
        ("import", cmd_import, "the `pulumi import --file` document of the objects the stack adopts"),
        ("diff", cmd_diff, "what a config change (or a saved plan) changes in the stack"),
        ("graph", cmd_graph, "write the site's Mermaid diagram"),
        ("flows", cmd_flows, "print the cross-cluster flow matrix"),
    ):
        command = sub.add_parser(name, help=help_text)
        command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
        command.add_argument("--project-dir", default=str(PROJECT_DIR), help="checkout holding __main__.py and the stack files")
        if name == "diff":
            command.add_argument("--set", action="append", metavar="PATH=VALUE", help="change the stack's config, e.g. site.teams.litho={}")
            command.add_argument("--unset", action="append", metavar="PATH", help="remove a key from the stack's config, e.g. site.teams.fdc")
            command.add_argument("--against", metavar="PLAN_JSON", help="compare with a saved plan.json instead of the stack as is")
        if name == "graph":
            command.add_argument("--out", help="file to write (default docs/graphs/<stack>.md)")
        if name == "import":
            command.add_argument("--out", help="file to write (default: standard output)")
        if name == "stack-name":
            command.add_argument("--organization", help="the organization the run deploys to; must agree with the stack file's")
        command.set_defaults(func=func)
    serving = sub.add_parser("serving", help="the serving repository Argo CD applies (inference.delivery: argocd)")
    actions = serving.add_subparsers(dest="action", required=True)
    for action, help_text in (
        ("render", "write each model's objects as delivery pulumi registers them, in the repository's layout"),
        ("handover", "print the `pulumi state delete` commands that hand the live serving objects over to Argo CD"),
    ):
        command = actions.add_parser(action, help=help_text)
        command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
        command.add_argument("--project-dir", default=str(PROJECT_DIR), help="checkout holding __main__.py and the stack files")
        if action == "render":
            command.add_argument("--out", required=True, help="the site's directory in the serving repository (serving_repo.path)")
            command.add_argument("--check", action="store_true", help="write nothing: list how the directory differs from the "
                                 "stack's render, exit 1 if it does (CI of the serving repository)")
        command.set_defaults(func=cmd_serving)
    report = sub.add_parser("report", help="the plan as one static HTML page for the reviewers of a change")
    report.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    report.add_argument("--project-dir", default=str(PROJECT_DIR), help="checkout holding __main__.py and the stack files")
    report.add_argument("--out", required=True, metavar="DIR", help="folder to write index.html to")
    compared = report.add_mutually_exclusive_group()
    compared.add_argument("--against", metavar="PLAN_JSON", help="show the changes against a saved plan.json (fabctl plan)")
    compared.add_argument("--base", metavar="REF", help="show the changes against the stack at a git ref of the project "
                          "(its program and stack file there), e.g. origin/main")
    report.add_argument("--no-policies", action="store_true", help="skip the policy pack (it runs by default)")
    report.add_argument("--no-check", action="store_true", help="skip the deploy check (it runs by default)")
    _chart_options(report)
    report.set_defaults(func=cmd_report)
    mirror = sub.add_parser("mirror", help="everything the site's registry must hold, and the mirroring tools' inputs")
    mirror.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    mirror.add_argument("--project-dir", default=str(PROJECT_DIR), help="checkout holding __main__.py and the stack files")
    mirror.add_argument("--set", action="append", metavar="PATH=VALUE",
                        help="change the stack's config first, e.g. site.registry.images=registry.fab.internal/mirror")
    mirror.add_argument("--node-os", action="append", metavar="OS", help="an OS the GPU nodes run, as the NVIDIA operators "
                        "tag their drivers (ubuntu24.04, ubuntu22.04, rhel9.6); once per OS")
    mirror.add_argument("--node-arch", default="amd64", metavar="ARCH", help="the GPU nodes' architecture in the DOCA "
                        "driver's tag (default amd64)")
    mirror.add_argument("--digests", metavar="FILE", help=f"source image -> sha256 digest (YAML); default {DIGESTS_FILE} if present")
    mirror.add_argument("--out", metavar="DIR", help="write mirror.txt, mirror.json, skopeo-sync.yaml, copy-images.sh, charts.sh, "
                        "files.sh and maven.txt there")
    _chart_options(mirror, strict=False)  # mirror is always strict: exit 6 when a release is not rendered
    mirror.set_defaults(func=cmd_mirror)
    schema = sub.add_parser("schema", help="write the stack file JSON Schema and the configuration reference tables")
    schema.add_argument("--check", action="store_true", help="only check that the committed schema is current")
    schema.set_defaults(func=cmd_schema)
    verify_cli.add_parser(sub, PROJECT_DIR)
    access_cli.add_parser(sub, PROJECT_DIR)
    return p


def render_cache_folder(args: argparse.Namespace) -> Path | None:
    """Where the renders of the program (`program/`, fabctl.runs.cached), Helm's renders and the chart-value trials
    (fabctl.helm.render_cache) are kept: `--render-cache`, else `renders` in fabctl's cache (`cache_home`); None with
    `--no-render-cache`."""
    if args.no_render_cache:
        return None
    if args.render_cache:
        return Path(args.render_cache).absolute()
    return cache_home() / "renders"


PROGRAM_RENDERS = "program"
"""The render cache's folder of the program's renders (beside Helm's `template/`, `values/` and `crds/`)."""


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # soft_wrap: an error line stays one line, whatever the terminal width.
    console, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    if not hasattr(args, "render_cache"):
        return args.func(args, console, err)
    folder = render_cache_folder(args)
    with render_cache(folder), runs.cached(folder / PROGRAM_RENDERS if folder is not None else None):
        return args.func(args, console, err)


if __name__ == "__main__":
    sys.exit(main())
