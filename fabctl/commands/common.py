"""What the commands share: their exit statuses, a render or the reason there is none, a saved plan, a stack's site config."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from components.config import PROJECT, ConfigError, SiteConfig, parse_site
from fabctl.render import Plan, RenderError, render
from fabctl.stackfile import SITE_KEY, NoStackFile, StackFileError, read_stack_config, stack_file

EXIT_CONFIG, EXIT_USAGE, EXIT_CRASH, EXIT_POLICY, EXIT_DANGER, EXIT_CHECK = 1, 2, 3, 4, 5, 6


def render_or_report(stack: str, project_dir: Path, err: Console, config: dict[str, Any] | None = None,
                     noted: tuple[str, ...] = ()) -> Plan | int:
    """A render, or the exit status after printing why there is none. A note names each secret it stands in for, except
    those `noted` already."""
    try:
        plan = render(stack, project_dir, config)
    except StackFileError as exc:
        return stack_file_error(exc, err)
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


def stack_file_error(exc: StackFileError, err: Console) -> int:
    """Print why a stack file cannot be used: a missing one is a usage mistake, a broken one a config mistake."""
    for line in str(exc).splitlines():
        err.print(f"error: {line}", markup=False, highlight=False)
    return EXIT_USAGE if isinstance(exc, NoStackFile) else EXIT_CONFIG


def saved_plan(path: Path, stack: str, err: Console) -> Plan | int:
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


def stack_site(plan: Plan, project: Path, err: Console) -> SiteConfig | int:
    """The site config of a stack the render has just read and accepted, or the exit status."""
    try:
        with contextlib.chdir(project):  # the config's file paths are relative to the project
            return parse_site(read_stack_config(stack_file(project, plan.stack)).get(SITE_KEY))
    except (StackFileError, ConfigError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_USAGE
