"""`fabctl access --stack S --as SEAT`: what a seat can do on a site, from its offline render (docs/security.md,
"Who can do what: fabctl access")."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from fabctl.access.ci import WorkflowError
from fabctl.access.matrix import NOT_SEEN, evaluate
from fabctl.access.model import AREAS, Access, Principal
from fabctl.access.principal import SEAT_FORMS, SeatError, check_seat, resolve
from fabctl.commands.common import EXIT_USAGE, render_or_report


def add_parser(sub: Any, project_dir: Path) -> None:
    access = sub.add_parser("access", help="what a team, vendor, user or pull-request author can do on the site (offline)")
    access.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    access.add_argument("--as", dest="seat", required=True, metavar="SEAT", help=f"who asks: {', '.join(SEAT_FORMS)}")
    access.add_argument("--format", choices=("table", "json"), default="table", help="a table per area (default) or JSON")
    access.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    access.set_defaults(func=cmd_access)


def cmd_access(args: argparse.Namespace, console: Console, err: Console) -> int:
    try:
        check_seat(args.seat)  # before the render: a seat of no form is refused at once
    except SeatError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_USAGE
    project = Path(args.project_dir)
    plan = render_or_report(args.stack, project, err)
    if isinstance(plan, int):
        return plan
    try:
        principal = resolve(plan, args.seat, project_dir=project)
        found = evaluate(plan, principal)
    except (SeatError, WorkflowError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_USAGE
    if args.format == "json":
        console.print_json(json.dumps({"stack": args.stack, "seat": args.seat, "principal": asdict(principal),
                                       "accesses": [asdict(a) for a in found], "not_seen": list(NOT_SEEN)}))
        return 0
    print_matrix(console, args.stack, args.seat, principal, found)
    return 0


def principal_lines(principal: Principal) -> list[str]:
    """What the seat holds, one line per kind of identity."""
    lines = []
    if principal.keycloak_groups:
        lines.append(f"Keycloak groups: {', '.join(principal.keycloak_groups)}")
    if principal.rbac_subjects:
        lines.append(f"RBAC subjects: {', '.join(f'{kind} {name}' for kind, name in principal.rbac_subjects)}")
    for cluster, spaces in principal.pod_namespaces.items():
        lines.append(f"pods on {cluster}: {', '.join(spaces)}")
    for cluster, accounts in principal.service_accounts.items():
        lines.append(f"ServiceAccounts on {cluster}: {', '.join(accounts)}")
    if principal.minio_users:
        lines.append(f"MinIO users: {', '.join(principal.minio_users)}")
    if principal.polaris_principals:
        lines.append(f"Polaris principals: {', '.join(principal.polaris_principals)}")
    if principal.source_cidrs:
        lines.append(f"connects from: {', '.join(principal.source_cidrs)}")
    return lines or ["no identity of the site"]


def print_matrix(console: Console, stack: str, seat: str, principal: Principal, found: list[Access]) -> None:
    console.print(f"[bold]{stack}: what {seat} can do[/bold]", highlight=False)
    for line in principal_lines(principal):
        console.print(f"  {line}", markup=False, highlight=False)
    for area in AREAS:
        rows = [a for a in found if a.area == area]
        if not rows:
            continue
        table = Table(title=f"{area} ({len(rows)})", title_justify="left", show_lines=True)
        for column in ("target", "scope", "allowed", "via", "escalation"):
            table.add_column(column, style="red" if column == "escalation" else None)
        for a in rows:
            table.add_row(a.target, a.scope, a.allowed, a.via, a.escalation)
        console.print(table)
    shown = {a.area for a in found}
    console.print(f"No access in: {', '.join(a for a in AREAS if a not in shown) or 'none'}", highlight=False, markup=False)
    console.print("Not seen: " + "; ".join(NOT_SEEN), highlight=False, markup=False)
