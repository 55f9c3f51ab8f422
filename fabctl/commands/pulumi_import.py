"""`fabctl import`: the `pulumi import --file` document of the objects the stack adopts (config `adopt`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from fabctl.commands.common import render_or_report
from fabctl.render import Plan


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
    plan = render_or_report(args.stack, Path(args.project_dir), err)
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


def add_parser(sub: Any, project_dir: Path) -> None:
    command = sub.add_parser("import", help="the `pulumi import --file` document of the objects the stack adopts")
    command.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    command.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    command.add_argument("--out", help="file to write (default: standard output)")
    command.set_defaults(func=cmd_import)
