"""`fabctl diff`: what a config change (or a saved plan) adds, removes, changes and replaces in the stack."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from fabctl.commands.common import EXIT_DANGER, EXIT_USAGE, render_or_report, saved_plan, stack_file_error
from fabctl.diff import diff, set_path, unset_path
from fabctl.render import Plan
from fabctl.stackfile import SITE_KEY, StackFileError, read_stack_config, stack_file


def cmd_diff(args: argparse.Namespace, console: Console, err: Console) -> int:
    project = Path(args.project_dir)
    if not args.set and not args.unset and not args.against:
        err.print("error: give --set PATH=VALUE, --unset PATH or --against PLAN_JSON", markup=False)
        return EXIT_USAGE
    if args.against:
        before: Plan | int = saved_plan(Path(args.against), args.stack, err)
    else:
        before = render_or_report(args.stack, project, err)
    if isinstance(before, int):
        return before
    try:
        config = read_stack_config(stack_file(project, args.stack))
        for assignment in args.set or []:
            set_path(config, assignment, SITE_KEY)
        for path in args.unset or []:
            unset_path(config, path, SITE_KEY)
    except StackFileError as exc:
        return stack_file_error(exc, err)
    except ValueError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_USAGE
    after = render_or_report(args.stack, project, err, config, noted=before.stand_ins)
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


def add_parser(sub: Any, project_dir: Path) -> None:
    command = sub.add_parser("diff", help="what a config change (or a saved plan) changes in the stack")
    command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    command.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    command.add_argument("--set", action="append", metavar="PATH=VALUE", help="change the stack's config, e.g. site.teams.litho={}")
    command.add_argument("--unset", action="append", metavar="PATH", help="remove a key from the stack's config, e.g. site.teams.fdc")
    command.add_argument("--against", metavar="PLAN_JSON", help="compare with a saved plan.json instead of the stack as is")
    command.set_defaults(func=cmd_diff)
