"""`fabctl serving render|handover`: the serving repository Argo CD applies (inference.delivery: argocd)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from fabctl.commands.common import EXIT_CONFIG, EXIT_CRASH, render_or_report, stack_file_error
from fabctl.serving import ServingError, delivered_by_pulumi, drift, handover_commands, serving_tree, write_tree
from fabctl.stackfile import StackFileError, read_stack_config, stack_file


def _serving_tree(args: argparse.Namespace, err: Console) -> dict[str, Any] | int:
    """The serving objects the stack registers with `inference.delivery: pulumi`, or the exit status."""
    project = Path(args.project_dir)
    try:
        config = delivered_by_pulumi(read_stack_config(stack_file(project, args.stack)))
    except StackFileError as exc:
        return stack_file_error(exc, err)
    except ServingError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_CONFIG
    plan = render_or_report(args.stack, project, err, config)
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


def add_parser(sub: Any, project_dir: Path) -> None:
    serving = sub.add_parser("serving", help="the serving repository Argo CD applies (inference.delivery: argocd)")
    actions = serving.add_subparsers(dest="action", required=True)
    for action, help_text in (
        ("render", "write each model's objects as delivery pulumi registers them, in the repository's layout"),
        ("handover", "print the `pulumi state delete` commands that hand the live serving objects over to Argo CD"),
    ):
        command = actions.add_parser(action, help=help_text)
        command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
        command.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
        if action == "render":
            command.add_argument("--out", required=True, help="the site's directory in the serving repository (serving_repo.path)")
            command.add_argument("--check", action="store_true", help="write nothing: list how the directory differs from the "
                                 "stack's render, exit 1 if it does (CI of the serving repository)")
        command.set_defaults(func=cmd_serving)
