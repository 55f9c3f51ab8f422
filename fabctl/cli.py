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
import sys

from rich.console import Console

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before a site is parsed)
from fabctl import runs
from fabctl.commands import access, check, diff, flows, graph, mirror, plan, pulumi_import, report, schema, serving, stack_name
from fabctl.commands.charts import PROGRAM_RENDERS, render_cache_folder
from fabctl.helm import render_cache
from fabctl.render import PROJECT_DIR
from fabctl.verify import cli as verify

COMMANDS = (plan, check, stack_name, pulumi_import, diff, graph, flows, serving, report, mirror, schema, verify, access)
"""The command modules, in the order `--help` lists them; each registers its parser with `add_parser(sub, project_dir)`."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fabctl", description="Offline tooling for fab-platform site stacks.")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub, PROJECT_DIR)
    return p


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
