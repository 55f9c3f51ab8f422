"""`fabctl stack-name`: the stack's `<organization>/fab-platform/<stack>` name, for CI."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from rich.console import Console

from components.config import PROJECT, ConfigError, parse_site
from fabctl.commands.common import EXIT_CONFIG, EXIT_USAGE, stack_file_error
from fabctl.stackfile import SITE_KEY, StackFileError, read_stack_config, stack_file


def cmd_stack_name(args: argparse.Namespace, console: Console, err: Console) -> int:
    """The stack's fully qualified name, `<organization>/fab-platform/<stack>`, for CI: the stack file's
    `federation.organization`, which must agree with `--organization` (the CI's) when both are given."""
    project = Path(args.project_dir)
    try:
        raw = read_stack_config(stack_file(project, args.stack)).get(SITE_KEY)
        with contextlib.chdir(project):  # the config's file paths are relative to the project
            site = parse_site(raw)
    except StackFileError as exc:
        return stack_file_error(exc, err)
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


def add_parser(sub: Any, project_dir: Path) -> None:
    command = sub.add_parser("stack-name", help="the stack's <organization>/fab-platform/<stack> name, for CI")
    command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    command.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    command.add_argument("--organization", help="the organization the run deploys to; must agree with the stack file's")
    command.set_defaults(func=cmd_stack_name)
