"""`fabctl plan`: render a stack under mocks, print its tree, write its manifests and plan.json, run the policy pack and
the deploy check."""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.tree import Tree

from fabctl.commands.charts import chart_options, chart_source, render_with_charts
from fabctl.commands.check import run_check
from fabctl.commands.common import EXIT_CRASH, EXIT_POLICY
from fabctl.policy import PolicyPackError, analyze
from fabctl.progress import Phases
from fabctl.render import HELM_RELEASE_TYPE, K8S_PROVIDER_TYPE, SITE_WIDE, Plan


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
    charts = None if args.no_check else chart_source(args, err)  # before the render: a wrong option is said at once
    if isinstance(charts, int):
        return charts
    with Phases(err, f"plan {args.stack}") as phases:
        with phases.phase("render"):
            plan = render_with_charts(args.stack, Path(args.project_dir), err, charts)
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
        checked = run_check(plan, args, console, err, charts, phases)
        return status or checked


def add_parser(sub: Any, project_dir: Path) -> None:
    plan = sub.add_parser("plan", help="render a stack offline under Pulumi mocks")
    plan.add_argument("--stack", required=True, help="stack name, e.g. site-a (reads Pulumi.<stack>.yaml)")
    plan.add_argument("--out", default=str(project_dir / "out"), help="output folder (default: out/)")
    plan.add_argument(
        "--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files (default: this one)"
    )
    plan.add_argument("--no-policies", action="store_true", help="skip the policy pack (it runs by default)")
    plan.add_argument("--no-check", action="store_true", help="skip the deploy check (it runs by default)")
    chart_options(plan)
    plan.set_defaults(func=cmd_plan)
